import Dispatch
import Glibc
import Synchronization
import Testing

@testable import SeggetSystem

/// `PatientOutput` on real pipes and sockets: it waits for a slow reader, gives up only when asked
/// while nothing goes out, and reports how far it got.
@Suite struct PatientOutputTests {
    func makePipe() -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        return (fds[0], fds[1])
    }

    @Test func aPipeWithNobodyReadingIsGivenUpOnWhenAsked() {
        let (r, w) = makePipe()
        defer { close(r); close(w) }
        let out = PatientOutput(FileDescriptor(rawValue: w))
        #expect(out.kind == .pipe)
        #expect(out.isWritableNow)
        let bytes = [UInt8](repeating: 7, count: 1 << 20)
        var asked = 0
        let p = bytes.withUnsafeBytes { out.write($0) { asked += 1; return asked >= 2 } }
        #expect(p.error == .interrupted)
        #expect(p.written == 65536)  // the pipe's default capacity, then nothing more
        #expect(asked == 2)
        #expect(!out.isWritableNow)
        // The descriptor given stays blocking: only segget's own twin is not.
        #expect(fcntl(w, F_GETFL) & O_NONBLOCK == 0)
    }

    @Test func aSlowReaderGetsEveryByteInOrder() throws {
        let (r, w) = makePipe()
        defer { close(r); close(w) }
        let bytes = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let received = Mutex<[UInt8]>([])
        let done = DispatchSemaphore(value: 0)
        let total = bytes.count
        try SystemThread.detach {
            var got: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 7000)
            while got.count < total {
                let n = buffer.withUnsafeMutableBytes { read(r, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                got.append(contentsOf: buffer[..<n])
                usleep(50)
            }
            received.withLock { $0 = got }
            done.signal()
        }
        let out = PatientOutput(FileDescriptor(rawValue: w))
        let p = bytes.withUnsafeBytes { out.write($0) { false } }
        #expect(p == WriteProgress(written: bytes.count, error: nil))
        done.wait()
        #expect(received.withLock { $0 } == bytes)
    }

    @Test func aReaderThatLeftIsABrokenPipe() {
        signal(SIGPIPE, SIG_IGN)
        let (r, w) = makePipe()
        defer { close(w) }
        close(r)
        let out = PatientOutput(FileDescriptor(rawValue: w))
        let p = out.write("line\n") { false }
        #expect(p.error == .brokenPipe)
        #expect(p.written == 0)
    }

    @Test func aSocketWithNobodyReadingIsGivenUpOnWhenAsked() {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let out = PatientOutput(FileDescriptor(rawValue: fds[1]))
        #expect(out.kind == .socket)
        let bytes = [UInt8](repeating: 1, count: 8 << 20)
        let p = bytes.withUnsafeBytes { out.write($0) { true } }
        #expect(p.error == .interrupted)
        #expect(p.written > 0 && p.written < bytes.count)
    }

    @Test func aFileIsWrittenAsBefore() throws {
        let path = "/tmp/segget-patient-\(getpid())"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer { close(fd); unlink(path) }
        let out = PatientOutput(FileDescriptor(rawValue: fd))
        #expect(out.kind == .other)
        #expect(out.isWritableNow)
        #expect(out.write("abc") { true } == WriteProgress(written: 3, error: nil))
    }
}
