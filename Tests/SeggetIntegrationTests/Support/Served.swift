import SeggetTestServer

extension TestServer {
    /// A test server, started, with one resource: `body` under `/name`. The set-up most integration
    /// tests begin with; the caller stops it (`defer { server.stop() }`).
    static func serving(_ body: [UInt8], as name: String = "f") throws -> TestServer {
        let server = try TestServer()
        try server.start()
        server.addResource(name: name, bytes: body)
        return server
    }
}
