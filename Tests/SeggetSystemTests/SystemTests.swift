import Dispatch
import Glibc
import Synchronization
import Testing
@testable import SeggetSystem

@Suite("Errno")
struct ErrnoTests {
    @Test func namedErrorsMapToTheirNumbers() {
        let expected: [(Errno, Int32)] = [
            (.interrupted, EINTR), (.noSuchFileOrDirectory, ENOENT), (.fileExists, EEXIST),
            (.tooManySymbolicLinkLevels, ELOOP), (.ioError, EIO), (.noSpace, ENOSPC), (.badFileDescriptor, EBADF),
            (.invalidArgument, EINVAL), (.notSupported, EOPNOTSUPP), (.permissionDenied, EACCES),
            (.notPermitted, EPERM), (.readOnlyFileSystem, EROFS), (.wouldBlock, EWOULDBLOCK), (.notDirectory, ENOTDIR),
            (.brokenPipe, EPIPE),
        ]
        for (error, number) in expected {
            #expect(error.rawValue == number)
            #expect(error == Errno(rawValue: number))
        }
    }

    @Test func failedCallsThrowTheirErrno() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        #expect(throws: Errno.noSuchFileOrDirectory) { _ = try FileDescriptor.open(dir + "/missing", .readOnly) }
        #expect(throws: Errno.fileExists) { try FileSystem.makeDirectory(dir) }
        let file = try PosixFile.open(path: dir + "/file", mode: .createExclusive(permissions: 0o600))
        file.close()
        #expect(throws: Errno.notDirectory) { _ = try FileDescriptor.open(dir + "/file/x", .readOnly) }
        #expect(throws: Errno.notDirectory) { try FileSystem.syncDirectory(dir + "/file") }
        #expect(Errno(rawValue: ENOENT).description == "No such file or directory")
    }
}

@Suite("Retry helpers")
struct RetryHelperTests {
    /// A fake `write` that takes at most `step` bytes a call and fails with EINTR every third call.
    @Test func shortWritesAndInterruptsAreRetried() {
        var sink: [Int] = []
        var calls = 0
        let progress = retryingWrites(count: 100) { done in
            calls += 1
            if calls % 3 == 0 {
                errno = EINTR
                return -1
            }
            let n = min(7, 100 - done)
            sink.append(contentsOf: done..<done + n)
            return n
        }
        #expect(progress == WriteProgress(written: 100, error: nil))
        #expect(sink == Array(0..<100))
    }

    @Test func aWriteOfNothingIsAnIOError() {
        let progress = retryingWrites(count: 10) { done in done == 0 ? 4 : 0 }
        #expect(progress == WriteProgress(written: 4, error: .ioError))
    }

    @Test func otherErrorsStopTheLoopWithTheCountSoFar() {
        let progress = retryingWrites(count: 10) { done in
            if done < 6 { return 3 }
            errno = ENOSPC
            return -1
        }
        #expect(progress == WriteProgress(written: 6, error: .noSpace))
    }

    @Test func theCallerMayStopAfterAShortWrite() {
        let progress = retryingWrites(count: 10, continueAfterShortWrite: { $0 % 4 == 0 }) { _ in 3 }
        #expect(progress == WriteProgress(written: 3, error: nil))
    }

    @Test func readsStopAtEndOfFile() throws {
        var calls = 0
        let result = retryingReads(count: 10) { done in
            calls += 1
            if calls == 2 {
                errno = EINTR
                return -1
            }
            return done < 6 ? 3 : 0
        }
        #expect(try result.get() == 6)
    }

    /// A real pipe whose reader takes a few bytes at a time: every byte arrives, in order.
    @Test func writeAllThroughASlowPipe() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        let reader = FileDescriptor(rawValue: ends[0])
        let writer = FileDescriptor(rawValue: ends[1])
        let payload = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let failure = Mutex<Errno?>(nil)
        let done = ConditionLock()
        let finished = Mutex(false)
        try SystemThread.detach {
            let result = payload.withUnsafeBytes { bytes in Result { () throws(Errno) in try writer.writeAll(bytes) } }
            if case .failure(let error) = result { failure.withLock { $0 = error } }
            writer.close()
            done.withLock {
                finished.withLock { $0 = true }
                done.broadcast()
            }
        }
        var received: [UInt8] = []
        var small = [UInt8](repeating: 0, count: 97)
        while true {
            let n = small.withUnsafeMutableBytes { read(reader.rawValue, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            received.append(contentsOf: small[..<n])
        }
        reader.close()
        done.withLock { while !finished.withLock({ $0 }) { done.wait() } }
        #expect(failure.withLock { $0 } == nil)
        #expect(received == payload)
    }

    /// Signals without `SA_RESTART` interrupt a writer blocked on a full pipe (EINTR, or a short write):
    /// `writeAll` carries on and every byte still arrives.
    @Test func writeAllSurvivesSignals() throws {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in signalsSeen.add(1, ordering: .relaxed) }
        action.sa_flags = 0  // no SA_RESTART: the blocked write returns early
        sigemptyset(&action.sa_mask)
        var previous = sigaction()
        #expect(sigaction(SIGUSR2, &action, &previous) == 0)
        defer { sigaction(SIGUSR2, &previous, nil) }

        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        let reader = FileDescriptor(rawValue: ends[0])
        let writer = FileDescriptor(rawValue: ends[1])
        let payload = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let thread = Mutex<pthread_t?>(nil)
        let failure = Mutex<Errno?>(nil)
        try SystemThread.detach {
            // The test runner's threads may block signals; the new thread inherits that mask.
            var unblock = sigset_t()
            sigemptyset(&unblock)
            sigaddset(&unblock, SIGUSR2)
            pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
            thread.withLock { $0 = pthread_self() }
            let result = payload.withUnsafeBytes { bytes in Result { () throws(Errno) in try writer.writeAll(bytes) } }
            if case .failure(let error) = result { failure.withLock { $0 = error } }
            writer.close()
        }
        while thread.withLock({ $0 }) == nil { usleep(1000) }
        let target = thread.withLock { $0 }!
        let before = signalsSeen.load(ordering: .relaxed)
        // The pipe holds 64 KiB and nothing reads yet, so the writer stays blocked (and alive) through
        // every signal: none can reach a thread that has ended, or another test's thread.
        for _ in 0..<10 {
            usleep(10_000)
            pthread_kill(target, SIGUSR2)
        }
        for _ in 0..<2000 where signalsSeen.load(ordering: .relaxed) == before { usleep(1000) }
        var received: [UInt8] = []
        received.reserveCapacity(payload.count)
        var block = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = block.withUnsafeMutableBytes { read(reader.rawValue, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            received.append(contentsOf: block[..<n])
        }
        reader.close()
        #expect(failure.withLock { $0 } == nil)
        #expect(received == payload)
        #expect(signalsSeen.load(ordering: .relaxed) > before)
    }
}

private let signalsSeen = Atomic<Int>(0)

@Suite("Files")
struct FileTests {
    /// `O_DIRECT` write and read back, on a file in the package's directory (tmpfs refuses `O_DIRECT`);
    /// where the file system refuses it too, the ordinary descriptor is used, as the engine does.
    @Test func directWriteReadRoundTrip() throws {
        let dir = makeTemporaryDirectory(in: ".build")
        defer { removeTree(dir) }
        let file = try PosixFile.open(path: dir + "/data", mode: .createExclusive(permissions: 0o600))
        defer { file.close() }
        try file.preallocate(length: 1 << 20)
        let direct = file.openDirect()
        defer { direct?.close() }
        let descriptor = direct ?? file.descriptor
        let out = AlignedBuffer(count: 64 << 10)
        #expect(Int(bitPattern: out.base) % directIOAlignment == 0)
        for i in 0..<out.count { out.base.storeBytes(of: UInt8(truncatingIfNeeded: i &* 11), toByteOffset: i, as: UInt8.self) }
        try descriptor.writeAll(UnsafeRawBufferPointer(out.bytes), at: 8192)
        try descriptor.dataSync()
        let back = AlignedBuffer(count: 64 << 10)
        #expect(try descriptor.readAll(into: back.bytes, at: 8192) == back.count)
        #expect(memcmp(out.base, back.base, out.count) == 0)
        // Read through the ordinary descriptor too: the same bytes.
        #expect(try file.read(count: 16, at: 8192) == Array(UnsafeRawBufferPointer(out.bytes)[0..<16]) as [UInt8])
        try file.descriptor.advise(.sequential)
        #expect(try file.descriptor.status().size == 1 << 20)
        #expect(try file.descriptor.status().kind == .regular)
    }

    @Test func directDescriptorIsTheSameFile() throws {
        let dir = makeTemporaryDirectory(in: ".build")
        defer { removeTree(dir) }
        let file = try PosixFile.open(path: dir + "/data", mode: .createExclusive(permissions: 0o600))
        defer { file.close() }
        guard let direct = file.openDirect() else { return }  // no O_DIRECT here
        defer { direct.close() }
        let (a, b) = (try direct.status(), try file.descriptor.status())
        #expect(a.device == b.device && a.inode == b.inode)
    }

    @Test func locksExcludeAnotherOpenFile() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let first = try PosixFile.open(path: dir + "/locked", mode: .createExclusive(permissions: 0o600))
        let second = try PosixFile.open(path: dir + "/locked", mode: .openExisting)
        defer { second.close() }
        try first.tryLockExclusively()
        #expect(throws: Errno.wouldBlock) { try second.tryLockExclusively() }
        #expect(throws: Errno.wouldBlock) { try second.descriptor.tryLock(.shared) }
        try first.descriptor.unlock()
        try second.descriptor.tryLock(.shared)
        #expect(throws: Errno.wouldBlock) { try first.tryLockExclusively() }
        first.close()
        try second.tryLockExclusively()  // converts its own shared lock
    }

    @Test func directoriesAndPaths() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let sub = dir + "/sub"
        #expect(!FileSystem.exists(sub))
        try FileSystem.makeDirectory(sub, permissions: 0o700)
        #expect(FileSystem.isDirectory(sub))
        #expect(FileSystem.status(sub)?.permissions == 0o700)
        let file = try PosixFile.open(path: sub + "/a", mode: .createExclusive(permissions: 0o600))
        file.close()
        #expect(!FileSystem.isDirectory(sub + "/a"))
        try FileSystem.rename(from: sub + "/a", to: sub + "/b")
        try FileSystem.syncDirectory(sub)
        #expect(!FileSystem.exists(sub + "/a"))
        #expect(FileSystem.exists(sub + "/b"))
        #expect(symlink(sub + "/nowhere", sub + "/dangling") == 0)
        #expect(FileSystem.exists(sub + "/dangling"))
        #expect(FileSystem.status(sub + "/dangling") == nil)
        #expect(FileSystem.status(sub + "/dangling", followingLinks: false)?.kind == .symbolicLink)
        try FileSystem.remove(sub + "/b")
        try FileSystem.remove(sub + "/b")
    }
}

@Suite("Threads")
struct ThreadTests {
    @Test func detachedThreadsRunAndSignal() throws {
        let lock = ConditionLock()
        let count = Mutex(0)
        for _ in 0..<4 {
            try SystemThread.detach(stackSize: 1 << 20) {
                lock.withLock {
                    count.withLock { $0 += 1 }
                    lock.broadcast()
                }
            }
        }
        lock.withLock { while count.withLock({ $0 }) < 4 { lock.wait() } }
        #expect(count.withLock { $0 } == 4)
    }
}

@Suite struct MemoryTests {
    /// Minor page faults of the calling thread so far (other tests run on other threads meanwhile).
    private func faults() -> Int {
        var usage = rusage()
        getrusage(1, &usage)  // RUSAGE_THREAD (Linux; Glibc does not export the name)
        return usage.ru_minflt
    }

    /// A fresh anonymous mapping faults once per page as it is first written; prefaulted, it does not.
    @Test func prefaultMapsEveryPageInOneCall() throws {
        let count = 4 << 20
        for prefaulted in [false, true] {
            guard let raw = mmap(nil, count, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), raw != MAP_FAILED else {
                Issue.record("mmap failed")
                return
            }
            defer { munmap(raw, count) }
            // Small pages whatever the machine's transparent huge page setting: with `always`, the
            // fresh buffer would fault once per 2 MiB and the control below would measure nothing.
            _ = madvise(raw, count, MADV_NOHUGEPAGE)
            let buffer = UnsafeMutableRawBufferPointer(start: raw, count: count)
            if prefaulted { #expect(Memory.prefault(buffer)) }
            let before = faults()
            buffer.initializeMemory(as: UInt8.self, repeating: 7)
            let taken = faults() - before
            if prefaulted {
                #expect(taken < count / 4096 / 16, "writing a prefaulted buffer took \(taken) faults")
            } else {
                #expect(taken >= count / 4096 / 2, "a fresh buffer took only \(taken) faults: the test measures nothing")
            }
            #expect(buffer.allSatisfy { $0 == 7 })
        }
    }

    /// The pages are mapped as they are: bytes already written stay.
    @Test func prefaultKeepsTheContents() {
        var bytes = [UInt8](repeating: 0, count: 1 << 20)
        for i in stride(from: 0, to: bytes.count, by: 4093) { bytes[i] = UInt8(truncatingIfNeeded: i) }
        let copy = bytes
        bytes.withUnsafeMutableBytes { _ = Memory.prefault($0) }
        #expect(bytes == copy)
        #expect(!Memory.prefault(UnsafeMutableRawBufferPointer(start: nil, count: 0)))
    }
}

@Suite struct FilledBufferTests {
    /// Large or small, what is appended is what the buffer holds, and nothing past the capacity goes in.
    @Test(arguments: [100, 64 << 10, FilledBuffer.hugeFrom, 1 << 20, (2 << 20) + 1])
    func holdsWhatWasAppendedUpToItsCapacity(capacity: Int) {
        let buffer = FilledBuffer(capacity: capacity)
        var expected: [UInt8] = []
        var piece = 0
        while true {
            let bytes = (0..<min(16_411, capacity)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ piece) }
            let fits = expected.count + bytes.count <= capacity
            #expect(bytes.withUnsafeBytes { buffer.append($0) } == fits)
            if !fits { break }
            expected += bytes
            piece += 1
        }
        #expect(buffer.count == expected.count)
        #expect(Array(buffer.bytes) == expected)
    }
}

@Suite("Threads")
struct ThreadIdentityTests {
    /// `SystemThread.current` tells the calling thread from another (a `DownloadLoop` posts its own
    /// work without waking itself, and must wake for every other thread's).
    @Test func theCurrentThreadIsItselfAndNoOther() throws {
        let here = SystemThread.current
        #expect(here == SystemThread.current)
        let seen = Mutex<(SystemThread.ID, Bool)?>(nil)
        let done = DispatchSemaphore(value: 0)
        try SystemThread.detach {
            let there = SystemThread.current
            seen.withLock { $0 = (there, there == SystemThread.current) }
            done.signal()
        }
        done.wait()
        let (there, sameThere) = try #require(seen.withLock { $0 })
        #expect(sameThere)
        #expect(there != here)
    }
}

@Suite struct MachineLoadTests {
    /// This thread runs while it reads the count, so at least one; at most every thread there is.
    @Test func runnableThreadsCountTheCaller() throws {
        let n = try #require(SystemThread.runnableNow)
        #expect(n >= 1)
        let file = try PosixFile.open(path: "/proc/loadavg", mode: .readOnly)
        defer { file.close() }
        let text = String(decoding: try file.read(count: 128, at: 0), as: UTF8.self)
        let threads = text.split(separator: " ")[3].split(separator: "/")[1]
        #expect(n <= Int(threads)! + 64)
        #expect(SystemThread.availableCPUs >= 1)
    }
}
