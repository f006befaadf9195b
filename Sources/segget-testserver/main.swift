// segget-testserver: serves files with every fault mode of SeggetTestServer, for shell tests and
// benchmarks. Prints `listening on http://HOST:PORT` first, exits cleanly on SIGTERM/SIGINT, and then
// prints the connection-limit counts (`maxconc`, when used) on stderr; `GET /_stats` serves them
// while it runs.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SeggetTestServer

let usage = """
    usage: segget-testserver [--host 127.0.0.1] [--port 0] [--file NAME=PATH ...] [--dir DIR] [--log FILE]

      --host ADDR        Address to bind (127.0.0.1 or ::1).
      --port N           Port to bind; 0 picks a free one.
      --file NAME=PATH   Serve PATH at /NAME and /MODE/NAME (repeatable).
      --dir DIR          Serve every regular file in DIR under its own name.
      --log FILE         Append `METHOD PATH STATUS BODYBYTES REMOTEPORT ARRIVED SERVED` per finished
                         request (seconds since the server started; SERVED: when a worker took it
                         under `workers`, else -).
      --help             Show this help.

    Modes: \(FaultMode.allCases.filter { $0 != .normal }.map(\.rawValue).joined(separator: " "))
    Pacing and limits (any mode): rate catchup firstbyte slowports slowfirst slowevery slowfraction seed
      slowrate slowafter slowfrom ramp slowfirstbyte maxconc reject retryafter ratelimit reset workers close
      (see Sources/SeggetTestServer/FaultMode.swift).
    GET /_stats answers `admitted=A rejected=R in-flight=I max-in-flight=M max-demand=D workers-busy=B
    workers-queued=Q` for the maxconc limits and the workers queues (?reset=1 clears the counts after
    answering); the same line goes to stderr on exit.
    GET /_sign/NAME?ttl=S answers a URL of the expiring mode for NAME, valid for S seconds, with the
    other parameters passed on (version=2 serves a second object under the name).
    """

/// stderr through write(2): the C `stderr` global is shared mutable state to Swift 6.
func printError(_ message: String) {
    let bytes = Array("segget-testserver: \(message)\n".utf8)
    _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
}

func fail(_ message: String) -> Never {
    printError("\(message)\n\(usage)")
    exit(2)
}

struct Options {
    var host = "127.0.0.1"
    var port = 0
    var files: [(name: String, path: String)] = []
    var directory: String?
    var logPath: String?
}

func parseOptions(_ arguments: [String]) -> Options {
    var options = Options()
    var rest = arguments[...]
    while let argument = rest.popFirst() {
        var name = argument
        var inlineValue: String?
        if argument.hasPrefix("--"), let eq = argument.firstIndex(of: "=") {
            name = String(argument[..<eq])
            inlineValue = String(argument[argument.index(after: eq)...])
        }
        func value() -> String {
            if let inlineValue { return inlineValue }
            guard let next = rest.popFirst() else { fail("\(name) needs a value") }
            return next
        }
        switch name {
        case "--help", "-h":
            print(usage)
            exit(0)
        case "--host":
            options.host = value()
        case "--port":
            guard let port = Int(value()), (0...65535).contains(port) else { fail("--port needs a number 0-65535") }
            options.port = port
        case "--file":
            let spec = value()
            guard let eq = spec.firstIndex(of: "="), eq != spec.startIndex else { fail("--file needs NAME=PATH, got \(spec)") }
            options.files.append((String(spec[..<eq]), String(spec[spec.index(after: eq)...])))
        case "--dir":
            options.directory = value()
        case "--log":
            options.logPath = value()
        default:
            fail("unknown argument \(argument)")
        }
    }
    return options
}

func isRegularFile(_ path: String) -> Bool {
    var info = stat()
    return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
}

func regularFiles(in directory: String) -> [(name: String, path: String)] {
    guard let dir = opendir(directory) else { fail("cannot open directory \(directory): \(String(cString: strerror(errno)))") }
    defer { closedir(dir) }
    var found: [(String, String)] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        let path = directory + "/" + name
        if name != ".", name != "..", isRegularFile(path) { found.append((name, path)) }
    }
    return found.sorted { $0.0 < $1.0 }
}

/// Appends request lines; one fputs per line keeps concurrent connection threads from interleaving.
final class RequestLog: @unchecked Sendable {
    private let file: UnsafeMutablePointer<FILE>

    init(path: String) {
        guard let file = fopen(path, "a") else { fail("cannot open log \(path): \(String(cString: strerror(errno)))") }
        self.file = file
    }

    func write(_ line: String) {
        fputs(line + "\n", file)
        fflush(file)
    }
}

let options = parseOptions(Array(CommandLine.arguments.dropFirst()))

// Block the signals before any server thread exists so that they all inherit the mask and only
// sigwait below receives SIGTERM/SIGINT.
// A shell starts background jobs with SIGINT ignored, and an ignored signal is discarded before
// sigwait can see it: restore the default action (harmless while the signal is blocked).
signal(SIGINT, SIG_DFL)
signal(SIGTERM, SIG_DFL)
var stopSignals = sigset_t()
sigemptyset(&stopSignals)
sigaddset(&stopSignals, SIGINT)
sigaddset(&stopSignals, SIGTERM)
pthread_sigmask(SIG_BLOCK, &stopSignals, nil)

let server: TestServer
do {
    server = try TestServer(host: options.host, port: options.port)
} catch {
    printError("\(error)")
    exit(1)
}

var files = options.files
if let directory = options.directory { files += regularFiles(in: directory) }
for (name, path) in files {
    guard isRegularFile(path), access(path, R_OK) == 0 else { fail("cannot read file \(path)") }
    server.addResource(name: name, filePath: path)
}

if let logPath = options.logPath {
    let log = RequestLog(path: logPath)
    server.onRequestFinished { request in
        let target = request.query.isEmpty ? request.path : request.path + "?" + request.query
        let method = request.method.isEmpty ? "-" : request.method
        let arrived = Format3.seconds(request.arrivedAt - server.startedAt)
        let served = request.servedAt.map { Format3.seconds($0 - server.startedAt) } ?? "-"
        log.write("\(method) \(target.isEmpty ? "-" : target) \(request.status) \(request.bodyBytesSent) \(request.remotePort) \(arrived) \(served)")
    }
}

do {
    try server.start()
} catch {
    printError("\(error)")
    exit(1)
}
print("listening on \(server.baseURL)")
fflush(nil)  // flushes stdout; shell tests read the port from this line

var received: Int32 = 0
sigwait(&stopSignals, &received)
server.stop()
let limits = server.concurrency
if limits.admitted + limits.rejected > 0 { printError("connection limits: \(limits)") }
exit(0)

/// Seconds with three decimals, for the log.
enum Format3 {
    static func seconds(_ s: Double) -> String {
        let ms = Int((s * 1000).rounded())
        let frac = String(ms % 1000)
        return "\(ms / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac)"
    }
}
