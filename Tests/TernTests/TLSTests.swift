// TLS from Swift and from the CLI, against nginx's https servers (valid, expired, not yet
// valid, wrong host, self-signed, client certificate required) and faultserver's TLS peers
// (garbage instead of a handshake, a TLS 1.3 server that requires a client certificate).

import Foundation
import HTTPTypes
import Testing
@testable import Tern

extension TernTests {
    @Suite struct TLS {
        func run(_ request: Request) -> Result<Response, TernError> {
            request.callbackQueue = .global()
            do {
                return .success(try request.executeAndWait())
            } catch {
                return .failure(error)
            }
        }

        func trusted(_ servers: Servers) throws -> TLSOptions {
            TLSOptions(caFile: try servers.must("CA_PEM"))
        }

        @Test func verifiedWithCAFileAndDirectory() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.https("TLS_PORT", "/1k.bin"))
            request.tls = try trusted(servers)
            let response = try run(request).get()
            #expect(response.statusCode == 200)
            #expect(response.data == (try fixture(servers, "1k.bin")))
            let info = try #require(response.tlsInfo)
            #expect(info.version == response.headerFields[HTTPField.Name("X-SSL-Protocol")!])
            #expect(info.version.hasPrefix("TLSv1."))
            #expect(!info.wasClientCertificateRequested)
            #expect(request.tlsInfo == info)

            let byDirectory = Request(url: servers.https("TLS_PORT", "/1k.bin"))
            byDirectory.tls = TLSOptions(caDirectory: try servers.must("CA_DIR"))
            #expect(try run(byDirectory).get().statusCode == 200)

            let plain = Request(url: servers.nginx("/1k.bin"))
            #expect(try run(plain).get().tlsInfo == nil, "no TLS facts for plain HTTP")
        }

        @Test func systemStoreRejectsTheTestCA() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.https("TLS_PORT", "/1k.bin"))
            let error = try #require(run(request).failure)
            #expect(error.code == .tlsUnknownAuthority)
            #expect(error.isTLSVerificationFailure)
            #expect(error.phase == .tls)
        }

        @Test func engineDefaultsAndPerRequestOverride() throws {
            let servers = try Servers.get()
            let engine = try Engine(configuration: .init(tls: try trusted(servers)))
            let request = Request(url: servers.https("TLS_PORT", "/1k.bin"))
            request.engine = engine
            #expect(try run(request).get().statusCode == 200, "the engine's CA file applies")

            let strict = Request(url: servers.https("TLS_PORT", "/1k.bin"))
            strict.engine = engine
            strict.tls = .default  // the request's own options win: the system store
            #expect(run(strict).failure?.code == .tlsUnknownAuthority)
        }

        @Test func verificationFailuresTellWhatIsWrong() throws {
            let servers = try Servers.get()
            let tls = try trusted(servers)
            let cases: [(String, TernError.Code)] = [
                ("TLS_EXPIRED_PORT", .tlsCertificateExpired),
                ("TLS_NOTYET_PORT", .tlsCertificateNotYetValid),
                ("TLS_WRONGHOST_PORT", .tlsHostnameMismatch),
            ]
            for (key, code) in cases {
                let request = Request(url: servers.https(key, "/1k.bin"))
                request.tls = tls
                let error = try #require(run(request).failure, "\(key)")
                #expect(error.code == code, "\(key): \(error)")
                #expect(error.isTLSVerificationFailure)
                #expect(error.message.contains("127.0.0.1:\(servers.env[key] ?? "")"), "\(error.message)")
            }
            let selfSigned = Request(url: servers.https("TLS_SELFSIGNED_PORT", "/1k.bin"))
            selfSigned.tls = tls
            let error = try #require(run(selfSigned).failure)
            #expect(error.isTLSVerificationFailure, "\(error)")

            let garbage = Request(url: servers.https("TLS_GARBAGE_PORT", "/"))
            garbage.tls = tls
            #expect(run(garbage).failure?.code == .tlsHandshakeFailed)

            let missingCA = Request(url: servers.https("TLS_PORT", "/1k.bin"))
            missingCA.tls = TLSOptions(caFile: "/nonexistent/ca.pem")
            #expect(run(missingCA).failure?.code == .tlsCAFileError)
        }

        @Test func insecureAcceptsAnyCertificate() throws {
            let servers = try Servers.get()
            for key in ["TLS_EXPIRED_PORT", "TLS_WRONGHOST_PORT", "TLS_SELFSIGNED_PORT"] {
                let request = Request(url: servers.https(key, "/1k.bin"))
                request.tls = .insecure
                #expect(try run(request).get().statusCode == 200, "\(key)")
            }
        }

        @Test func sessionsResumeOnANewConnection() throws {
            let servers = try Servers.get()
            let engine = try Engine(configuration: .init(tls: try trusted(servers)))
            var infos: [TLSInfo] = []
            var reused: [String] = []
            for _ in 0..<2 {
                let request = Request(url: servers.https("TLS_PORT", "/1k.bin"))
                request.engine = engine
                request.persistent = false  // a new connection each time
                let response = try run(request).get()
                infos.append(try #require(response.tlsInfo))
                reused.append(response.headerFields[HTTPField.Name("X-SSL-Session-Reused")!] ?? "")
            }
            #expect(infos.map(\.isSessionResumed) == [false, true])
            #expect(reused == [".", "r"], "nginx agrees")
        }

        @Test func clientCertificates() throws {
            let servers = try Servers.get()
            let ca = try servers.must("CA_PEM")
            let cert = try servers.must("CLIENT_CERT")
            let url = servers.https("TLS_CLIENTCERT_PORT", "/1k.bin")

            let without = Request(url: url)
            without.tls = TLSOptions(caFile: ca)
            let refused = try run(without).get()
            #expect(refused.statusCode == 400, "nginx answers 400 without a certificate")
            #expect(refused.tlsInfo?.wasClientCertificateRequested == true)

            let with = Request(url: url)
            with.tls = TLSOptions(
                caFile: ca,
                clientCertificate: .init(certificateFile: cert, keyFile: try servers.must("CLIENT_KEY")))
            let accepted = try run(with).get()
            #expect(accepted.statusCode == 200)
            #expect(accepted.headerFields[HTTPField.Name("X-Client-Verify")!] == "SUCCESS")
            #expect(accepted.tlsInfo?.wasClientCertificateRequested == false)

            let encrypted = Request(url: url)
            encrypted.tls = TLSOptions(
                caFile: ca,
                clientCertificate: .init(
                    certificateFile: cert, keyFile: try servers.must("CLIENT_KEY_ENC"),
                    password: try servers.must("CLIENT_KEY_PASSWORD")))
            #expect(try run(encrypted).get().statusCode == 200)

            let wrongPassword = Request(url: url)
            wrongPassword.tls = TLSOptions(
                caFile: ca,
                clientCertificate: .init(
                    certificateFile: cert, keyFile: try servers.must("CLIENT_KEY_ENC"),
                    password: "wrong"))
            #expect(run(wrongPassword).failure?.code == .tlsCertificateFileError)

            // A TLS 1.3 server that fails the handshake without a certificate.
            let strict = Request(url: servers.https("TLS_REQCERT_PORT", "/"))
            strict.tls = TLSOptions(caFile: ca)
            let error = try #require(run(strict).failure)
            #expect(error.code == .tlsClientCertificateRequired, "\(error)")
            if case .failure(TernError.tlsClientCertificateRequired) = run(strict) {
                // the static member also works as a pattern
            } else {
                Issue.record("TernError.tlsClientCertificateRequired did not match")
            }
        }

        @Test func largeDownloadOverTLSIsByteIdentical() throws {
            let servers = try Servers.get()
            let file = temporaryPath("tls-100m")
            defer { try? FileManager.default.removeItem(atPath: file) }
            let request = Request(url: servers.https("TLS_PORT", "/100m.bin"))
            request.tls = try trusted(servers)
            request.downloadFile = file
            #expect(try run(request).get().statusCode == 200)
            #expect(sha256(file: file) == servers.sha("SHA_100M"))
        }

        // MARK: - CLI

        @Test func cliTrustsTheGivenCA() throws {
            let servers = try Servers.get()
            let ca = try servers.must("CA_PEM")
            let url = servers.https("TLS_PORT", "/1k.bin").absoluteString
            let ok = try tern(["-sS", "--cacert", ca, url])
            #expect(ok.status == 0, "\(ok.stderr)")
            #expect(ok.stdout == (try fixture(servers, "1k.bin")))
            let dir = try tern(["-sS", "--capath", try servers.must("CA_DIR"), "-o", "/dev/null", url])
            #expect(dir.status == 0, "\(dir.stderr)")
            let untrusted = try tern(["-sS", "-o", "/dev/null", url])
            #expect(untrusted.status == 60, "the system store does not know the test CA")
            #expect(try tern(["-s", "--cacert", "/nonexistent.pem", url]).status == 77)
        }

        @Test func cliVerificationFailuresExit60AndInsecureSucceeds() throws {
            let servers = try Servers.get()
            let ca = try servers.must("CA_PEM")
            for (key, words) in [
                ("TLS_WRONGHOST_PORT", "mismatch"), ("TLS_EXPIRED_PORT", "expired"),
                ("TLS_NOTYET_PORT", "not yet valid"), ("TLS_SELFSIGNED_PORT", "self-signed"),
            ] {
                let url = servers.https(key, "/1k.bin").absoluteString
                let run = try tern(["-sS", "--cacert", ca, "-o", "/dev/null", url])
                #expect(run.status == 60, "\(key): \(run.stderr)")
                #expect(run.stderr.contains(words), "\(key): \(run.stderr)")
                let insecure = try tern(["-s", "-k", url])
                #expect(insecure.status == 0, "\(key) with -k: \(insecure.stderr)")
                #expect(insecure.stdout == (try fixture(servers, "1k.bin")))
                #expect(try tern(["-s", "--insecure", "-o", "/dev/null", url]).status == 0)
            }
            let garbage = try tern(["-sS", "--cacert", ca, servers.https("TLS_GARBAGE_PORT", "/").absoluteString])
            #expect(garbage.status == 35, "\(garbage.stderr)")
        }

        @Test func cliClientCertificates() throws {
            let servers = try Servers.get()
            let ca = try servers.must("CA_PEM")
            let cert = try servers.must("CLIENT_CERT")
            let key = try servers.must("CLIENT_KEY")
            let encrypted = try servers.must("CLIENT_KEY_ENC")
            let url = servers.https("TLS_CLIENTCERT_PORT", "/1k.bin").absoluteString

            let without = try tern(["--cacert", ca, "-o", "/dev/null", "-w", "%{http_code}", url])
            #expect(without.text == "400")
            #expect(without.stderr.contains("the server asked for a client certificate; use -E/--cert"),
                    "\(without.stderr)")
            let quiet = try tern(["-s", "--cacert", ca, "-o", "/dev/null", url])
            #expect(quiet.stderr.isEmpty, "-s silences the hint")
            let failing = try tern(["-sSf", "--cacert", ca, "-o", "/dev/null", url])
            #expect(failing.status == 22)

            let with = try tern(["-sS", "--cacert", ca, "-E", cert, "--key", key, url])
            #expect(with.status == 0, "\(with.stderr)")
            #expect(with.stdout == (try fixture(servers, "1k.bin")))
            #expect(!with.stderr.contains("client certificate"))

            let password = try servers.must("CLIENT_KEY_PASSWORD")
            let inline = try tern(["-sS", "--cacert", ca, "-E", "\(cert):\(password)", "--key", encrypted, "-o", "/dev/null", url])
            #expect(inline.status == 0, "\(inline.stderr)")
            let pass = try tern(["-sS", "--cacert", ca, "--cert", cert, "--key", encrypted, "--pass", password, "-o", "/dev/null", url])
            #expect(pass.status == 0, "\(pass.stderr)")
            let wrong = try tern(["-sS", "--cacert", ca, "-E", "\(cert):nope", "--key", encrypted, "-o", "/dev/null", url])
            #expect(wrong.status == 58, "\(wrong.stderr)")
            // curl's escape for a colon in the certificate's path: -E 'dir/a\:b.pem:password'.
            let dir = temporaryPath("certs")
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            try FileManager.default.createSymbolicLink(atPath: dir + "/a:b.pem", withDestinationPath: cert)
            let escaped = try tern(["-sS", "--cacert", ca, "-E", "\(dir)/a\\:b.pem:\(password)", "--key", encrypted, "-o", "/dev/null", url])
            #expect(escaped.status == 0, "\(escaped.stderr)")
            let missing = try tern(["-sS", "--cacert", ca, "-E", "/nonexistent.pem", "-o", "/dev/null", url])
            #expect(missing.status == 58, "\(missing.stderr)")

            // TLS 1.3 server failing the handshake without a certificate: 58 with a message.
            let strictURL = servers.https("TLS_REQCERT_PORT", "/").absoluteString
            let strict = try tern(["-sS", "--cacert", ca, strictURL])
            #expect(strict.status == 58, "\(strict.stderr)")
            #expect(strict.stderr.contains("client certificate"), "\(strict.stderr)")
            let strictOK = try tern(["-sS", "--cacert", ca, "-E", cert, "--key", key, strictURL])
            #expect(strictOK.status == 0, "\(strictOK.stderr)")
            #expect(strictOK.text.hasPrefix("reqcert ok CN=tern-test-client"))
        }
    }
}

extension Result {
    /// The failure, or `nil` on success.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
