// Library users pass digests (`ExpectedDigest`) in `DownloadOptions`; one import should be enough.
@_exported import SeggetVerify
// Metalink documents (`MetalinkDocument`, `MetalinkSource.load`) come with the library too.
@_exported import SeggetMetalink
