import Glibc
import Segget
import Testing

@testable import segget

/// `--ca-certificate` (and curl's name for it, `--cacert`): checked and made absolute before any
/// request. scripts/tests/ca-certificate.sh downloads with it from nginx and a private authority.
@Suite(.serialized) struct CACertificateOptionTests {
    let url = "https://127.0.0.1:9/x"

    func write(_ text: String, to path: String) {
        let f = fopen(path, "w")!
        fputs(text, f)
        fclose(f)
    }

    @Test func aPEMFileIsTakenAndMadeAbsolute() throws {
        let dir = String(cString: mkdtemp(strdup("/tmp/segget-ca-opt.XXXXXX")))
        defer { _ = system("rm -rf '\(dir)'") }
        write("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", to: dir + "/ca.pem")
        let absolute = try Get.parse(["--ca-certificate", dir + "/ca.pem", url]).downloadOptions()
        #expect(absolute.transfer.caCertificate == dir + "/ca.pem")
        let old = getcwd(nil, 0)!
        defer { chdir(old); free(old) }
        chdir(dir)
        let relative = try Get.parse(["--cacert", "ca.pem", url]).downloadOptions()
        #expect(relative.transfer.caCertificate == dir + "/ca.pem")
    }

    @Test func aFileWithoutAPEMCertificateIsRefused() throws {
        let dir = String(cString: mkdtemp(strdup("/tmp/segget-ca-opt.XXXXXX")))
        defer { _ = system("rm -rf '\(dir)'") }
        write("\u{30}\u{82}\u{03}binary", to: dir + "/ca.der")
        for (path, words) in [(dir + "/ca.der", "holds no PEM certificate"), (dir + "/none.pem", "cannot read the CA certificate file"),
                              ("-", "standard input")] {
            do {
                _ = try Get.parse(["--ca-certificate", path, url]).downloadOptions()
                Issue.record("\(path) was taken")
            } catch let e as SeggetError {
                #expect(e.kind == .usage)
                #expect(e.message.contains(words), "\(e.message)")
            }
        }
    }

    @Test func noOptionLeavesTheSystemsAuthorities() throws {
        #expect(try Get.parse([url]).downloadOptions().transfer.caCertificate == nil)
    }
}
