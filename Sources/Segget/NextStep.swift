/// The advice a failure's message ends with where it depends on how segget runs. On the command line
/// a download continues when the same command runs again, and options have segget's flags; a
/// daemon's task continues when its URL is added again (the new task takes the partial download
/// its journal names: `DownloadQueue.freePath`), its options have aria2's names (those it takes only when it starts are `segget daemon`'s), it always verifies certificates, and a task's
/// retries are its `max-tries` (a failed one is added again with a higher one). Messages
/// interpolate `cli`; the daemon shows them through `forDaemon`, which puts each `daemon` in its
/// place. Text of one case must not contain another's (`cli` texts are replaced longest first).
public enum NextStep: CaseIterable, Sendable {
    /// Retries spent on a network failure.
    case resumeLaterOrRaiseRetries
    /// The same, for a server without byte ranges: nothing is kept to resume.
    case againOrRaiseRetries
    /// Retries spent on answers that cannot be used.
    case tryOneConnection
    /// After a journal that could not be written.
    case resume
    /// After data that could not be written, where a journal keeps the rest.
    case resumeNothingLost
    /// After data that could not be written, where nothing could be kept (no byte ranges).
    case startOver
    /// A mirror standing in for the main URL cannot continue its download.
    case whenMainURLAnswers
    /// A server's certificate no trusted authority signed (a daemon always verifies: no `-k`).
    case trustPrivateAuthority
    /// The same, against the authorities of `--ca-certificate`.
    case checkAuthorityFile
    /// A server's certificate that no authority would make valid (expired, for another name).
    case serverMustFixCertificate
    /// A server that requires a client certificate (a daemon's is given when it starts).
    case giveClientCertificate
    /// A server whose handshake failure may mean it wants one.
    case mayWantClientCertificate
    /// The same five for an https proxy (`TLSPeer.proxy`).
    case trustProxyAuthority
    case checkProxyAuthorityFile
    case proxyMustFixCertificate
    case giveProxyClientCertificate
    case mayWantProxyClientCertificate
    /// A mirror standing in for the main URL cannot continue what an earlier run left: start over from it.
    case startOverFromMirror
    /// A mirror serves another size than the finished file an earlier run left: replace that file.
    case replaceWithMirrors
    /// The disk is too full for the file.
    case freeSpace
    /// A file that failed its digest was discarded: the next try starts afresh.
    case fetchAfresh
    /// A proxy that cannot be reached or resolved.
    case otherProxy
    /// A partial download under the name came from another URL that nothing shows is the same file.
    case otherURLsPartial
    /// A server that wants credentials none were given for.
    case giveCredentials
    /// A server that refused the credentials given.
    case checkCredentials
    /// A connection that was not made within the connect timeout.
    case allowLongerToConnect
    /// A digest from the server's own field that the file did not match.
    case skipServerDigest
    /// A file an earlier run downloaded from this URL, changed on the server since.
    case downloadChangedFileAgain
    /// A file larger than the process's file size limit (`ulimit -f`) allows.
    case raiseFileSizeLimit
    /// A file larger than its file system can hold (FAT's 4 GiB).
    case otherFileSystem
    /// A whole-file digest failed on bytes from more than one server: which one serves other bytes.
    case findBadMirror

    public var cli: String {
        switch self {
        case .resumeLaterOrRaiseRetries: "run the same command to resume later, or raise --retries"
        case .againOrRaiseRetries: "run the same command to download it again later (the server serves no byte ranges, so it starts over from the first byte), or raise --retries"
        case .tryOneConnection: "try -n 1 or another server"
        case .resume: "run the same command to resume."
        case .resumeNothingLost: "run the same command to resume; nothing already downloaded is lost."
        case .startOver: "run the same command to download it again; it starts over from the first byte (without byte ranges nothing of it is kept)."
        case .whenMainURLAnswers: "run the same command when the main URL answers again"
        case .trustPrivateAuthority: "give that authority's certificate with --ca-certificate FILE; pass -k/--insecure only if you trust this server"
        case .checkAuthorityFile: "check that the file holds the authority that signed this server's certificate, or pass -k/--insecure only if you trust this server"
        case .serverMustFixCertificate: "the server's certificate must be fixed; pass -k/--insecure only if you trust this server"
        case .giveClientCertificate: "give it with --certificate FILE (and --private-key FILE if the key is apart)"
        case .mayWantClientCertificate: "(give it with --certificate FILE)"
        case .trustProxyAuthority: "give that authority's certificate with --proxy-ca-certificate FILE; pass --proxy-insecure only if you trust this proxy"
        case .checkProxyAuthorityFile: "check that the file holds the authority that signed the proxy's certificate, or pass --proxy-insecure only if you trust this proxy"
        case .proxyMustFixCertificate: "the proxy's certificate must be fixed; pass --proxy-insecure only if you trust this proxy"
        case .giveProxyClientCertificate: "give it with --proxy-certificate FILE (and --proxy-private-key FILE if the key is apart)"
        case .mayWantProxyClientCertificate: "(give it with --proxy-certificate FILE)"
        case .startOverFromMirror: "pass --no-continue to download the file from the mirror"
        case .replaceWithMirrors: "pass --force to replace it with the mirror's"
        case .freeSpace: "free some space and run the command again"
        case .fetchAfresh: "the next run fetches it afresh"
        case .otherProxy: "give another with --proxy (or unset the *_proxy variables)"
        case .otherURLsPartial: "run segget with that URL to continue it, give --checksum with the file's digest to continue it from this URL, pass --no-continue to start over from this URL, or choose another name with -o"
        case .giveCredentials: "authentication is required; pass -u USER:PASSWORD or --netrc"
        case .checkCredentials: "check them (-u USER:PASSWORD, or the URL's USER:PASSWORD@)"
        case .allowLongerToConnect: " (--connect-timeout); check that the server is up and reachable, or allow longer with --connect-timeout."
        case .skipServerDigest: "--no-verify downloads without checking it."
        case .downloadChangedFileAgain: "Pass --force to download it again, or choose another name."
        case .raiseFileSizeLimit: "raise it (ulimit -f unlimited) in the shell that starts segget"
        case .otherFileSystem: "choose a directory on another file system with -d or -o"
        case .findBadMirror: "download it from one server at a time (without --mirror, or from one mirror alone) to find which"
        }
    }

    public var daemon: String {
        switch self {
        case .resumeLaterOrRaiseRetries: "add the URL again to resume later (the new task continues what this one saved), or with a higher max-tries"
        case .againOrRaiseRetries: "add the URL again to download it anew later (the server serves no byte ranges, so it starts over from the first byte), or with a higher max-tries"
        case .tryOneConnection: "try split=1 or another server"
        case .resume: "add the URL again to resume (the new task continues what this one saved)."
        case .resumeNothingLost: "add the URL again to resume; the new task continues what this one saved."
        case .startOver: "add the URL again to download it anew; it starts over from the first byte (without byte ranges nothing of it is kept)."
        case .whenMainURLAnswers: "add the URL again when the main URL answers"
        case .trustPrivateAuthority: "start the daemon with --ca-certificate FILE, that authority's certificate in FILE (a daemon always verifies certificates)"
        case .checkAuthorityFile: "check that the daemon's --ca-certificate file holds the authority that signed this server's certificate"
        case .serverMustFixCertificate: "the server's certificate must be fixed (a daemon always verifies certificates)"
        case .giveClientCertificate: "start the daemon with --certificate FILE (and --private-key FILE if the key is apart)"
        case .mayWantClientCertificate: "(start the daemon with --certificate FILE)"
        case .trustProxyAuthority: "start the daemon with --proxy-ca-certificate FILE, that authority's certificate in FILE (a daemon always verifies certificates)"
        case .checkProxyAuthorityFile: "check that the daemon's --proxy-ca-certificate file holds the authority that signed the proxy's certificate"
        case .proxyMustFixCertificate: "the proxy's certificate must be fixed (a daemon always verifies certificates)"
        case .giveProxyClientCertificate: "start the daemon with --proxy-certificate FILE (and --proxy-private-key FILE if the key is apart)"
        case .mayWantProxyClientCertificate: "(start the daemon with --proxy-certificate FILE)"
        case .startOverFromMirror: "add the task's URLs again (the mirror's too) with another out= to download the file from the mirror anew"
        case .replaceWithMirrors: "add the task's URLs again (the mirror's too) with another out= to download the mirror's beside it"
        case .freeSpace: "free some space and add the URL again"
        case .fetchAfresh: "adding the URL again fetches it afresh"
        case .otherProxy: "add the URL again with another all-proxy (or without one, if the daemon's *_proxy variables named it)"
        case .otherURLsPartial: "add that URL to continue it, add this one with the checksum option (the file's digest) to continue it from this URL, or give the task another out= (remove the partial download's .segget-part and .segget-journal to start over)"
        case .giveCredentials: "authentication is required; add the URL again with the user name and password in it (USER:PASSWORD@) or an Authorization line in the header option (the daemon reads no .netrc)"
        case .checkCredentials: "check them (the URL's USER:PASSWORD@, or the Authorization line of the header option)"
        case .allowLongerToConnect: "; check that the server is up and reachable, or add the URL again with a longer connect-timeout."
        case .skipServerDigest: "a task given the file's right digest in the checksum option is checked against that instead."
        case .downloadChangedFileAgain: "Remove that file and add the URL again to download it anew, or give the task another out=."
        case .raiseFileSizeLimit: "raise it where the daemon is started (ulimit -f unlimited in its shell, LimitFSIZE=infinity in a systemd unit) and restart the daemon"
        case .otherFileSystem: "add the URL again with a dir on another file system"
        case .findBadMirror: "add it again with one of its URLs at a time to find which"
        }
    }

    /// `message` with each step's command-line advice in the daemon's words.
    public static func forDaemon(_ message: String) -> String {
        allCases.sorted { $0.cli.count > $1.cli.count }.reduce(message) { $0.replacing($1.cli, with: $1.daemon) }
    }
}
