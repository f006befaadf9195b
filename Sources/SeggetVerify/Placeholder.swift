public enum SeggetVerifyPlaceholder {}
