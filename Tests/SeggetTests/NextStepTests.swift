import Glibc
import SeggetSystem
import Testing

@testable import Segget

/// The advice that depends on how segget runs: the command line's words, and the daemon's in their
/// place (a daemon's error message names no command to run again and no command-line option).
@Suite struct NextStepTests {
    @Test(arguments: NextStep.allCases) func theDaemonsWordsNameNoCommandLine(_ step: NextStep) {
        #expect(step.cli != step.daemon)
        #expect(!step.daemon.contains("same command"), "\(step.daemon)")
        // Only options of `segget daemon` itself, given when it starts.
        let rest = ["--proxy-ca-certificate", "--proxy-certificate", "--proxy-private-key", "--ca-certificate", "--certificate", "--private-key"].reduce(step.daemon) { $0.replacing($1, with: "") }
        #expect(!rest.contains("--") && !rest.contains("-n ") && !rest.contains("-k"), "\(step.daemon)")
        #expect(NextStep.forDaemon("x; \(step.cli)") == "x; \(step.daemon)")
    }

    /// No step's command-line text holds another's, so each is replaced whole whatever the order.
    @Test func noStepHoldsAnother() {
        for a in NextStep.allCases {
            for b in NextStep.allCases where a != b {
                #expect(!a.cli.contains(b.cli), "\(a) holds \(b)")
            }
        }
    }

    /// The engine's own messages, as the daemon stores them.
    @Test func theEnginesMessagesInTheDaemonsWords() {
        let full = NextStep.forDaemon(FetchEngine.writeError(Errno(rawValue: ENOSPC)).message)
        #expect(full == "the disk is full. Free some space, then add the URL again to resume; the new task continues what this one saved.")
        let whole = NextStep.forDaemon(FetchEngine.writeError(Errno(rawValue: EIO), resumable: false).message)
        #expect(whole.hasSuffix("then add the URL again to download it anew; it starts over from the first byte (without byte ranges nothing of it is kept)."), "\(whole)")
        let mirror = NextStep.forDaemon(SeggetError.standInCannot("http://m.example/f", "changed", continuing: "the file").message)
        #expect(mirror.hasSuffix("It is kept as it was: add the URL again when the main URL answers, or add the task's URLs again (the mirror's too) with another out= to download the file from the mirror anew."), "\(mirror)")
        #expect(!mirror.contains("--"), "\(mirror)")
        let finished = NextStep.forDaemon(SeggetError.standInCannot("http://m.example/f", "serves 5 bytes", continuing: "it", orElse: .replaceWithMirrors).message)
        #expect(finished.hasSuffix("or add the task's URLs again (the mirror's too) with another out= to download the mirror's beside it."), "\(finished)")
        let untrusted = NextStep.forDaemon(Prober.networkError(.peerFailedVerification, url: "https://h.example/f", verifyResult: 20).message)
        #expect(untrusted.hasSuffix("no trusted authority signed it (unable to get the local issuer certificate); if a private or company authority signed it, start the daemon with --ca-certificate FILE, that authority's certificate in FILE (a daemon always verifies certificates)."), "\(untrusted)")
        let expired = NextStep.forDaemon(Prober.networkError(.peerFailedVerification, url: "https://h.example/f", verifyResult: 10).message)
        #expect(expired.hasSuffix("it has expired; the server's certificate must be fixed (a daemon always verifies certificates)."), "\(expired)")
        let wanted = NextStep.forDaemon(Prober.networkError(.receiveError, url: "https://h.example/f", tlsAlert: .certificateRequired).message)
        #expect(wanted.hasSuffix("(TLS alert: certificate required); start the daemon with --certificate FILE (and --private-key FILE if the key is apart)."), "\(wanted)")
        let proxy = try! #require(Prober.proxyError(.couldNotConnect, url: "http://h.example/f", proxy: "http://p.example:3128", head: ResponseHead(), connected: false))
        let unreachable = NextStep.forDaemon(proxy.message)
        #expect(unreachable.hasSuffix("check that the proxy is up and reachable, or add the URL again with another all-proxy (or without one, if the daemon's *_proxy variables named it)."), "\(unreachable)")
        #expect(!unreachable.contains("--"), "\(unreachable)")
        // Exploratory run 7: four messages composed outside the steps named command-line options.
        let timedOut = NextStep.forDaemon(
            Prober.networkError(.operationTimedOut, url: "https://h.example/f", connected: false, connectTimeout: 15).message)
        #expect(timedOut == "could not connect to https://h.example/f within 15 s; check that the server is up and reachable, or add the URL again with a longer connect-timeout.", "\(timedOut)")
        let unauthorized = NextStep.forDaemon(Prober.statusError(401, url: "http://h.example/f").message)
        #expect(unauthorized.contains("the daemon reads no .netrc") && !unauthorized.contains("--") && !unauthorized.contains("-u "), "\(unauthorized)")
        let refused = NextStep.forDaemon(Prober.statusError(401, url: "http://h.example/f", sentCredentials: true).message)
        #expect(refused.contains("the Authorization line of the header option") && !refused.contains("-u "), "\(refused)")
        // A file larger than its file system holds names -d and -o on the command line only.
        if PosixFile.processFileSizeLimit == nil {
            let fat = FetchEngine.writeError(Errno.fileTooLarge, directory: "/mnt/usb", size: 5 << 30).message
            #expect(fat.hasSuffix("choose a directory on another file system with -d or -o."), "\(fat)")
            #expect(NextStep.forDaemon(fat).hasSuffix("(FAT's limit is 4 GiB less a byte); add the URL again with a dir on another file system."), "\(NextStep.forDaemon(fat))")
        }
        // Past the process's file size limit, on the write path: the daemon's words once, then the
        // write path's own way to continue.
        let limited = "this process may write no file larger than 1.0 MiB (its file size limit, ulimit -f), too little for a file of 4.0 MiB; \(NextStep.raiseFileSizeLimit.cli). Then \(NextStep.resumeNothingLost.cli)"
        #expect(NextStep.forDaemon(limited).hasSuffix("; raise it where the daemon is started (ulimit -f unlimited in its shell, LimitFSIZE=infinity in a systemd unit) and restart the daemon. Then add the URL again to resume; the new task continues what this one saved."), "\(NextStep.forDaemon(limited))")
        let plain = "the server answered 404 Not Found for http://h.example/f."
        #expect(NextStep.forDaemon(plain) == plain)
    }
}
