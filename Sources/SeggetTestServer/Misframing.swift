extension ResponsePlanner {
    /// The modes whose responses lie about or blur their own framing (see `FaultMode`): duplicate or
    /// malformed length fields, request-smuggling shapes, multipart answers to one range, header
    /// floods. Applied to the standard response for the request.
    func misframe(_ plan: inout ResponsePlan, route p: Route, representation rep: Representation, requestNumber n: Int64) {
        let hasBody = plan.status == 200 || plan.status == 206
        let count = plan.body.count
        switch p.mode {
        case .dupheader where plan.status == 206:
            guard case .slice(_, let first, let count) = plan.body else { return }
            if p.params["field"] == "length" {
                // Written before the real one, which libcurl then takes (it keeps the last).
                plan.headers.append(("Content-Length", "\(count + 1)"))
                return
            }
            // The first Content-Range is what was asked; the second, like the bytes, is moved.
            let shift = p.int("shift") ?? 1
            let last = first + count - 1
            let movedFirst = min(max(0, first + shift), rep.length - 1)
            let movedLast = min(max(movedFirst, last + shift), rep.length - 1)
            plan.headers.removeAll { $0.0 == "Content-Range" }
            plan.headers.append(("Content-Range", "bytes \(first)-\(last)/\(rep.length)"))
            plan.headers.append(("Content-Range", "bytes \(movedFirst)-\(movedLast)/\(rep.length)"))
            plan.body = .slice(rep, offset: movedFirst, count: movedLast - movedFirst + 1)
            plan.framing = .contentLength(movedLast - movedFirst + 1)
        case .badlength where hasBody:
            plan.omitFramingHeader = true
            plan.headers.append(("Content-Length", p.params["value"] ?? "-1"))
            plan.closeConnection = true
        case .smuggle where plan.status == 206:
            switch p.params["kind"] ?? "te-cl" {
            case "te-other":
                plan.framing = .chunked
                plan.omitFramingHeader = true
                plan.headers.append(("Transfer-Encoding", "gzip, chunked"))
            case "fold":
                plan.omitFramingHeader = true
                plan.headers.append(("Content-Length", "\r\n \(count)"))
                plan.closeConnection = true
            case "space":
                plan.omitFramingHeader = true
                plan.headers.append(("Content-Length ", "\(count)"))
                plan.closeConnection = true
            default:
                // The body is chunked (and the Transfer-Encoding line written); the length is a second opinion.
                plan.framing = .chunked
                plan.headers.append(("Content-Length", "\(count)"))
            }
        case .multipart where plan.status == 206 && n >= (p.int("after") ?? 1):
            guard case .slice(_, let first, let count) = plan.body else { return }
            var part = [UInt8](repeating: 0, count: Int(count))
            _ = part.withUnsafeMutableBytes { rep.read(at: first, into: $0) }
            let open = "--SEGGET\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes \(first)-\(first + count - 1)/\(rep.length)\r\n\r\n"
            let body = Array(open.utf8) + part + Array("\r\n--SEGGET--\r\n".utf8)
            plan.headers.removeAll { $0.0 == "Content-Range" || $0.0 == "Content-Type" }
            plan.headers.append(("Content-Type", "multipart/byteranges; boundary=SEGGET"))
            plan.body = .text(body)
            plan.framing = .contentLength(Int64(body.count))
        case .bigheaders:
            if let lines = p.int("lines") {
                for i in 0..<max(0, lines) { plan.headers.append(("X-Filler-\(i)", String(repeating: "b", count: 100))) }
            } else {
                plan.headers.append(("X-Filler", String(repeating: "a", count: Int(max(1, p.int("size") ?? 200_000)))))
            }
        default:
            break
        }
    }
}
