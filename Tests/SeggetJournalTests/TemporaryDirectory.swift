import Glibc

/// A fresh private directory under /tmp, removed by the caller with `removeTree`.
func makeTemporaryDirectory() -> String {
    var template = Array("/tmp/segget-journal-test-XXXXXX".utf8CString)
    let path = template.withUnsafeMutableBufferPointer { buffer -> String in
        guard let base = buffer.baseAddress, let result = mkdtemp(base) else { return "" }
        return String(cString: result)
    }
    precondition(!path.isEmpty, "mkdtemp failed")
    return path
}

func removeTree(_ path: String) {
    _ = system("rm -rf '\(path)'")
}
