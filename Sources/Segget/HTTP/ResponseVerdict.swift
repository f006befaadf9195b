/// What one request of a download asked the server for, and what the answer must match.
struct ResponseQuestion: Sendable, Equatable {
    /// The bytes asked for, half-open (`Range: bytes=lower-(upper-1)` when `ranged`).
    var range: Range<Int64>
    /// A `Range` request, or one plain stream from byte 0 (a server without ranges).
    var ranged: Bool
    /// The resource's length as the probe found it; nil only for a stream of unknown length.
    var totalLength: Int64?
    /// The validators the answer must not contradict (those of the source asked).
    var etag: String?
    var lastModified: String?
    /// For error messages (credentials are redacted there).
    var url: String

    /// `range` as it appears in a `Range` header and in messages.
    var rangeText: String { "\(range.lowerBound)-\(range.upperBound - 1)" }
}

/// What a connection does with a response head, decided before its first body byte is written.
///
/// One pure function of the request and the head (see `ResponseVerdict.init(for:head:)`), so that
/// every answer a server can give is a unit test, not a socket.
enum ResponseVerdict: Equatable, Sendable {
    /// Take the body: it is exactly the bytes asked for.
    case accept
    /// An honest shorter answer (RFC 9110 lets a server send less than asked): take the bytes up to
    /// `end` (exclusive), then ask for the rest without counting a failure.
    case acceptPrefix(end: Int64)
    /// A failure the same request may not meet again: retry after `after` seconds (nil: backoff).
    /// `kind` is the failure reported if retries run out.
    case retry(String, after: Double?, kind: FailureKind)
    /// The server ignored or mangled the byte range (same file): ranges are unusable, start over as
    /// one stream.
    case rangesIgnored(String)
    /// The resource changed on the server: the download must start over.
    case resourceChanged(String)
    /// No retry can change this answer.
    case fatal(SeggetError)

    /// Judges `head` as the answer to `question`: status, `Content-Range` equal to the request (or an
    /// honest prefix of it), exact length, no content coding, unchanged validators. The order of the
    /// checks decides which reason the user sees when an answer is wrong in several ways.
    init(for question: ResponseQuestion, head h: ResponseHead) {
        let asked = question.rangeText
        if h.status == 429 || h.status == 503 || (500...599).contains(h.status) || h.status == 408 {
            self = .retry("HTTP \(h.status)", after: h.retryAfter, kind: .httpStatus)
            return
        }
        if let verdict = Self.permanent(question, h, asked: asked) {
            self = verdict
            return
        }
        guard question.ranged else {
            self = Self.stream(question, h)
            return
        }
        switch h.status {
        case 206:
            guard let cr = h.contentRange else {
                self = .retry("a 206 without a usable Content-Range for bytes \(asked)", after: nil, kind: .protocolViolation)
                return
            }
            if let total = cr.completeLength, total != question.totalLength {
                self = .resourceChanged("its length changed from \(question.totalLength ?? 0) to \(total) bytes")
                return
            }
            let accepted: ResponseVerdict
            switch cr.answer(asked: question.range, total: question.totalLength) {
            case .whole: accepted = .accept
            case .prefix(let end): accepted = .acceptPrefix(end: end)
            case .mismatch:
                self = .retry("asked for bytes \(asked), the server sent \(h.value("content-range") ?? "?")", after: nil, kind: .protocolViolation)
                return
            }
            // A Content-Length that disagrees with the range, and a content coding, were refused by
            // `permanent` already.
            self = Self.validatorChange(question, h).map { .resourceChanged($0) } ?? accepted
        case 200:
            if let reason = Self.validatorChange(question, h) {
                self = .resourceChanged(reason)
            } else if let cl = h.contentLength, let total = question.totalLength, cl != total {
                self = .resourceChanged("its length changed from \(total) to \(cl) bytes")
            } else {
                // Same validators (or none to compare): the server ignores ranges at this offset.
                self = .rangesIgnored("the server ignored the byte range \(asked) and sent the whole file")
            }
        case 416:
            self = Self.unsatisfiable(question, h, asked: asked)
        default:
            self = .fatal(Prober.statusError(h.status, url: question.url))
        }
    }

    /// A 416 for a range inside the file: a changed file unless the answer itself says the length is
    /// the one known (`Content-Range: bytes */N`) and no validator differs. Then the server contradicts
    /// itself (a replica not yet in step, a cache's glitch), and it is this request's fault, retried
    /// like one, not a reason to throw away what the journal holds.
    private static func unsatisfiable(_ q: ResponseQuestion, _ h: ResponseHead, asked: String) -> ResponseVerdict {
        if let reason = validatorChange(q, h) { return .resourceChanged(reason) }
        if let total = h.contentRange?.completeLength, let known = q.totalLength {
            guard total == known else { return .resourceChanged("its length changed from \(known) to \(total) bytes") }
            if q.range.upperBound <= known {
                return .retry(
                    "the server refused bytes \(asked) as beyond the end (416) yet gives the length as \(total) bytes, as before",
                    after: h.retryAfter, kind: .protocolViolation)
            }
        }
        return .resourceChanged("the server says bytes \(asked) no longer exist (416)")
    }

    /// A plain stream from byte 0 wants a 200 of the probed length and validators.
    private static func stream(_ q: ResponseQuestion, _ h: ResponseHead) -> ResponseVerdict {
        if h.status == 206 {
            // Partial content for a request that asked for no range: the server contradicts itself.
            return .fatal(SeggetError(
                .protocolViolation,
                "\(URLParts.shown(q.url)) answered a request for the whole file with 206 Partial Content, which only a range request may get; the server is misbehaving. Try another server.",
                retryAdvice: .never))
        }
        guard h.status == 200 else { return .fatal(Prober.statusError(h.status, url: q.url)) }
        if let total = q.totalLength, let cl = h.contentLength, cl != total {
            return .resourceChanged("its length changed from \(total) to \(cl) bytes")
        }
        return validatorChange(q, h).map { .resourceChanged($0) } ?? .accept
    }

    /// Answers that no retry can change, decided before anything else about a 200 or 206: a coded
    /// range or several ranges for one (ranges are unusable: start over as one stream, as the probe
    /// would have), ambiguous framing (see `FramingProblem`).
    private static func permanent(_ q: ResponseQuestion, _ h: ResponseHead, asked: String) -> ResponseVerdict? {
        guard h.status == 200 || h.status == 206 else { return nil }
        if q.ranged, h.status == 206, let enc = h.contentEncoding {
            return .rangesIgnored("the server applied Content-Encoding '\(enc)' to the byte range \(asked), which makes its offsets meaningless")
        }
        if let problem = h.framingProblem { return .fatal(Prober.framingError(problem, url: q.url)) }
        if q.ranged, h.status == 206, h.isMultipartByteRanges {
            return .rangesIgnored("the server answered the byte range \(asked) with a multipart/byteranges body")
        }
        return nil
    }

    /// Why the answer's validators say the file is another one; nil when they agree or are absent.
    private static func validatorChange(_ q: ResponseQuestion, _ h: ResponseHead) -> String? {
        // The validators kept from the probe came from the server too: shown as `ServerText`.
        if let want = q.etag, let got = h.unsafeRawValue("etag"),
            !AgedETag.sameVersion(kept: want, got: got, keptModified: q.lastModified, gotModified: h.unsafeRawValue("last-modified"))
        {
            return "its ETag changed from \(ServerText(want)) to \(ServerText(got))"
        }
        if let want = q.lastModified, let got = h.unsafeRawValue("last-modified"), want != got {
            return "its Last-Modified changed from \(ServerText(want)) to \(ServerText(got))"
        }
        return nil
    }
}
