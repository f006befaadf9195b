import Glibc

/// Detached POSIX threads for work that blocks for a long time (a download, a hasher's reads).
///
/// Blocking work belongs on threads of its own: on Linux, Dispatch's global queues run about one thread
/// per CPU, so blocking work started there ran two at a time on a 2-core machine, and a thread parked in
/// `pread` for its whole life would tie up one of them.
public enum SystemThread {
    private final class Body {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }

    /// Runs `body` on a new detached thread with `stackSize` bytes of stack (nil: the system's default).
    /// Throws the error number if the thread could not be created.
    ///
    /// The corresponding C function is `pthread_create`.
    public static func detach(stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) throws(Errno) {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        if let stackSize { pthread_attr_setstacksize(&attributes, stackSize) }
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        let result = returnedErrno(retryOnInterrupt: false) {
            pthread_create(
                &thread, &attributes,
                { raw in
                    Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue().run()
                    return nil
                }, context)
        }
        if case .failure(let error) = result {
            Unmanaged<Body>.fromOpaque(context).release()
            throw error
        }
    }

    /// The CPUs online, at least 1 (not the process's affinity mask: Glibc's module has no
    /// `sched_getaffinity`). The corresponding C function is `sysconf(_SC_NPROCESSORS_ONLN)`.
    public static var availableCPUs: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// The threads of the whole system that are running or ready to run at this moment, the
    /// caller's among them (the fourth field of `/proc/loadavg`, before its slash); nil where it
    /// cannot be read.
    public static var runnableNow: Int? {
        guard let file = try? PosixFile.open(path: "/proc/loadavg", mode: .readOnly) else { return nil }
        defer { file.close() }
        guard let bytes = try? file.read(count: 128, at: 0) else { return nil }
        let fields = bytes.split(separator: UInt8(ascii: " "))
        guard fields.count >= 4, let slash = fields[3].firstIndex(of: UInt8(ascii: "/")) else { return nil }
        return Int(String(decoding: fields[3][..<slash], as: UTF8.self))
    }

    /// The calling thread, to compare with another: `pthread_self`.
    public static var current: ID { ID(raw: pthread_self()) }

    /// A thread's identity while it runs.
    public struct ID: Equatable, Sendable {
        fileprivate let raw: pthread_t
        public static func == (a: ID, b: ID) -> Bool { pthread_equal(a.raw, b.raw) != 0 }
    }
}

/// A pthread mutex with one condition variable, heap-allocated because pthread objects must not move.
public final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` holding the mutex.
    ///
    /// The corresponding C functions are `pthread_mutex_lock` and `pthread_mutex_unlock`.
    public func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Releases the mutex until woken, then takes it again; call only inside `withLock`, in a loop that
    /// rechecks its condition, since wake-ups can be spurious.
    ///
    /// The corresponding C function is `pthread_cond_wait`.
    public func wait() {
        pthread_cond_wait(condition, mutex)
    }

    /// Wakes every waiter.
    ///
    /// The corresponding C function is `pthread_cond_broadcast`.
    public func broadcast() {
        pthread_cond_broadcast(condition)
    }
}
