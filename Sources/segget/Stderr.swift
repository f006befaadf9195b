import Glibc

/// Writes text to standard error, unbuffered (no shared `FILE *`, so no concurrency hazard).
func writeStderr(_ text: String) {
    var t = text
    t.withUTF8 { buf in
        var off = 0
        while off < buf.count {
            let n = write(2, buf.baseAddress! + off, buf.count - off)
            if n < 0 {
                if errno == EINTR { continue }
                return
            }
            off += n
        }
    }
}
