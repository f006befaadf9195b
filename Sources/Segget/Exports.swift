// Library users pass digests (`ExpectedDigest`) in `DownloadOptions`; one import should be enough.
@_exported import SeggetVerify
