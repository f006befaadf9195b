// The journal's files are SeggetSystem's `PosixFile`s, and its errors SeggetSystem's `Errno`: re-export the
// module so that code using the journal (and its tests) names them without a second import.
@_exported import SeggetSystem

/// The real file is the journal's block storage.
extension PosixFile: BlockStorage {}
