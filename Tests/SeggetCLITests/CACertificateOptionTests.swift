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
        #expect(absolute.transfer.tls.caCertificate == dir + "/ca.pem")
        let old = getcwd(nil, 0)!
        defer { chdir(old); free(old) }
        chdir(dir)
        let relative = try Get.parse(["--cacert", "ca.pem", url]).downloadOptions()
        #expect(relative.transfer.tls.caCertificate == dir + "/ca.pem")
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
        #expect(try Get.parse([url]).downloadOptions().transfer.tls == TLSFiles())
    }
}

/// `--certificate` and `--private-key`: a PEM certificate with an unencrypted key, checked before any
/// request. scripts/tests/ca-certificate.sh shows one to nginx with `ssl_verify_client on`.
@Suite(.serialized) struct ClientCertificateOptionTests {
    let url = "https://127.0.0.1:9/x"
    let certificate = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    let key = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"
    let encrypted = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIF\n-----END ENCRYPTED PRIVATE KEY-----\n"

    func write(_ text: String, to path: String) {
        let f = fopen(path, "w")!
        fputs(text, f)
        fclose(f)
    }

    func refusal(_ arguments: [String]) -> String? {
        do {
            _ = try Get.parse(arguments + [url]).downloadOptions()
            return nil
        } catch let e as SeggetError {
            return e.kind == .usage ? e.message : "kind \(e.kind)"
        } catch {
            return "\(error)"
        }
    }

    @Test func theKeyGoesWithTheCertificate() throws {
        let dir = String(cString: mkdtemp(strdup("/tmp/segget-cert-opt.XXXXXX")))
        defer { _ = system("rm -rf '\(dir)'") }
        write(certificate, to: dir + "/c.pem")
        write(certificate + key, to: dir + "/both.pem")
        write(key, to: dir + "/c.key")
        write(encrypted, to: dir + "/enc.key")
        let apart = try Get.parse(["--certificate", dir + "/c.pem", "--private-key", dir + "/c.key", url]).downloadOptions()
        #expect(apart.transfer.tls == TLSFiles(clientCertificate: dir + "/c.pem", privateKey: dir + "/c.key"))
        let together = try Get.parse(["--certificate", dir + "/both.pem", url]).downloadOptions()
        #expect(together.transfer.tls == TLSFiles(clientCertificate: dir + "/both.pem"))
        #expect(refusal(["--certificate", dir + "/c.pem"])?.contains("holds no private key") == true)
        #expect(refusal(["--certificate", dir + "/c.pem", "--private-key", dir + "/enc.key"])?.contains("is encrypted") == true)
        #expect(refusal(["--private-key", dir + "/c.key"])?.contains("give the certificate too") == true)
        #expect(refusal(["--certificate", dir + "/c.key"])?.contains("holds no PEM certificate") == true)
        #expect(refusal(["--certificate", dir + "/both.pem", "--private-key", dir + "/c.pem"])?.contains("holds no PEM private key") == true)
    }
}
