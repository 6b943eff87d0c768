// Error mapping: each kind of failure arrives as the right TernError code, phase and message,
// and the Swift codes match the C engine's.

import CTern
import Dispatch
import Foundation
import Testing
@testable import Tern

extension TernTests {
    @Suite struct Errors {
        func failure(_ request: Request) -> TernError? {
            request.callbackQueue = .global()
            do {
                try request.executeAndWait()
                return nil
            } catch {
                return error
            }
        }

        @Test func dumpShowsTheErrorsParts() {
            let error = TernError(code: .connectionRefused, message: "connect to h:1: refused", host: "h")
            var dumped = ""
            dump(error, to: &dumped)
            for part in ["connect to h:1: refused", "\"h\"", "connect", "code"] {
                #expect(dumped.contains(part), "\(dumped)")
            }
            #expect(!dumped.contains("Details"), "\(dumped)")
        }

        @Test func connectionRefused() throws {
            let error = try #require(failure(Request(url: URL(string: "http://127.0.0.1:1/x")!)))
            #expect(error == .connectionRefused)
            #expect(error.phase == .connect)
            #expect(error.host == "127.0.0.1")
            #expect(error.message.contains("refused"), "\(error.message)")
            #expect(!error.isTimeout)
        }

        @Test func unresolvableHost() throws {
            let error = try #require(failure(Request(url: URL(string: "http://tern-test.invalid/")!)))
            #expect(error == .resolveFailed)
            #expect(error.phase == .resolve)
            #expect(error.message.contains("tern-test.invalid"))
        }

        @Test func headersTimeout() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/slowheaders?delay_ms=3000"))
            request.timeouts.headers = 0.3
            let started = Date()
            let error = try #require(failure(request))
            #expect(error == .headersTimedOut)
            #expect(error.isTimeout)
            #expect(TernError.timedOut ~= error)
            #expect(error.phase == .headers)
            #expect(Date().timeIntervalSince(started) < 2)
        }

        @Test func bodyTimeout() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/stall?stall_ms=3000"))
            request.timeouts.body = 0.3
            let error = try #require(failure(request))
            #expect(error == .bodyTimedOut)
            #expect(error.phase == .body)
            #expect(request.statusCode == 200, "the head arrived before the stall")
        }

        @Test func totalTimeout() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/stall?stall_ms=3000"))
            request.timeouts.total = 0.5
            let started = Date()
            let error = try #require(failure(request))
            #expect(error == .totalTimedOut)
            #expect(error.isTimeout)
            #expect(Date().timeIntervalSince(started) < 1.5)
        }

        @Test func timedOutPatternMatchesInCatch() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/slowheaders?delay_ms=3000"))
            request.timeouts.headers = 0.2
            request.callbackQueue = .global()
            do {
                try request.executeAndWait()
                Issue.record("expected a timeout")
            } catch TernError.timedOut {
                // any of the four
            } catch {
                Issue.record("unexpected \(error)")
            }
        }

        @Test func truncatedBody() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/truncate?len=1000&send=500"))
            let error = try #require(failure(request))
            #expect(error == .partialBody)
            #expect(error.phase == .body)
            #expect(request.data?.count == 500, "what arrived is kept")
        }

        @Test func resetAndEmptyReplyAndGarbage() throws {
            let servers = try Servers.get()
            #expect(failure(Request(url: servers.fault("/reset"))) == .connectionReset)
            #expect(failure(Request(url: servers.fault("/badstatus?variant=empty"))) == .emptyReply)
            #expect(failure(Request(url: servers.fault("/badstatus?variant=text"))) == .protocolError)
            #expect(failure(Request(url: servers.fault("/badchunk?variant=hex"))) == .badChunkedEncoding)
        }

        @Test func setupFailuresNeverReachTheNetwork() throws {
            let servers = try Servers.get()
            let ftp = try #require(failure(Request(url: URL(string: "ftp://127.0.0.1/x")!)))
            #expect(ftp == .badURL)
            #expect(ftp.phase == .setup)

            let framing = Request(url: servers.fault("/echo"))
            framing.headerFields[.contentLength] = "5"
            let header = try #require(failure(framing))
            #expect(header == .badHeader)
            #expect(header.message.contains("Content-Length"))

            let both = Request(url: servers.fault("/echo"), method: .post)
            both.body = Data("x".utf8)
            both.bodyFile = "/etc/hostname"
            #expect(failure(both) == .invalidArgument)

            let tiny = Request(url: servers.fault("/echo"))
            tiny.bufferSize = 10
            #expect(failure(tiny) == .invalidArgument)

            let missing = Request(url: servers.fault("/echo"), method: .put)
            missing.bodyFile = "/nonexistent/tern-upload"
            #expect(failure(missing) == .fileReadFailed)
        }

        @Test func listenerHearsSetupFailuresToo() async {
            let events = Recorder<Event>()
            let request = Request(url: URL(string: "ftp://127.0.0.1/x")!)
            request.callbackQueue = DispatchQueue(label: "tern.test.setup")
            request.listener = { _, state, percent in
                events.append(Event(state: state, percent: percent, onQueue: true))
                return true
            }
            await runToCompletion(request)
            #expect(events.all == [Event(state: .upload, percent: -1, onQueue: true)])
        }

        @Test func swiftCodesMatchTheEngine() {
            let codes: [(TernError.Code, String)] = [
                (.invalidArgument, "EINVAL"), (.outOfMemory, "ENOMEM"), (.badURL, "EBADURL"),
                (.badHeader, "EBADHEADER"), (.busy, "EBUSY"), (.resolveFailed, "ERESOLVE"),
                (.connectionRefused, "ECONNREFUSED"), (.connectFailed, "ECONNECT"),
                (.connectionReset, "ECONNRESET"), (.connectTimedOut, "ECONNECTTIMEOUT"),
                (.headersTimedOut, "EHEADERTIMEOUT"), (.bodyTimedOut, "EBODYTIMEOUT"),
                (.totalTimedOut, "ETOTALTIMEOUT"), (.protocolError, "EPROTO"),
                (.headersTooLarge, "EHEADERSIZE"), (.badChunkedEncoding, "ECHUNKED"),
                (.partialBody, "EPARTIAL"), (.emptyReply, "EEMPTYREPLY"), (.cancelled, "ECANCELED"),
                (.fileWriteFailed, "EFILEWRITE"), (.fileReadFailed, "EFILEREAD"),
                (.shutDown, "ESHUTDOWN"), (.ioError, "EIO"), (.rangeNotSatisfiable, "ERANGE"),
                (.callbackAborted, "ECALLBACK"), (.unsupported, "EUNSUPPORTED"),
                (.tlsHandshakeFailed, "ETLSHANDSHAKE"), (.tlsCertificateExpired, "ETLSCERTEXPIRED"),
                (.tlsCertificateNotYetValid, "ETLSCERTNOTYETVALID"),
                (.tlsHostnameMismatch, "ETLSHOSTNAME"), (.tlsUnknownAuthority, "ETLSUNKNOWNCA"),
                (.tlsVerifyFailed, "ETLSVERIFY"), (.tlsClientCertificateRequired, "ETLSCLIENTCERT"),
                (.tlsCertificateFileError, "ETLSCERTFILE"), (.tlsCAFileError, "ETLSCAFILE"),
                (.badContentEncoding, "EDECODE"), (.decodeLimitExceeded, "EDECODELIMIT"),
                (.tooManyRedirects, "ETOOMANYREDIRECTS"), (.redirectRefused, "EREDIRECT"),
                (.authenticationFailed, "EAUTH"), (.proxyError, "EPROXY"),
            ]
            for (code, name) in codes {
                #expect(code.name == name)
                #expect(code.description == String(cString: tern_strerror(code.rawValue)))
            }
            #expect(TernError(code: .connectTimedOut).isTimeout)
            #expect(TernError(code: .connectTimedOut) != .totalTimedOut)
            #expect(TernError(code: .cancelled, message: "a") == TernError(code: .cancelled, message: "b"))
        }
    }
}
