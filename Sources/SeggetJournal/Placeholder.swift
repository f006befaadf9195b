public enum SeggetJournalPlaceholder {}
