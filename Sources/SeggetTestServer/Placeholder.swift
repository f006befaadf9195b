public enum SeggetTestServerPlaceholder {}
