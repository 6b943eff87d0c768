// HTTP versions in the Swift API: Request.httpVersion reaches the engine and
// Response.httpVersion tells what came back. The HTTP/2 cases run against nginx's HTTP/2
// servers from the test servers' env file: H2_TLS_PORT (`listen ... ssl http2`, ALPN h2 and
// http/1.1) and H2C_PORT (`listen ... http2` without TLS: h2c with prior knowledge only).

import Foundation
import HTTPTypes
import Testing
@testable import Tern

extension Servers {
    /// A URL on nginx's HTTP/2 TLS server (name `localhost`, signed by `CA_PEM`).
    func h2TLS(_ path: String) throws -> URL {
        URL(string: "https://localhost:\(try must("H2_TLS_PORT"))\(path)")!
    }

    /// A URL on nginx's h2c server (HTTP/2 with prior knowledge, no TLS).
    func h2c(_ path: String) throws -> URL {
        URL(string: "http://127.0.0.1:\(try must("H2C_PORT"))\(path)")!
    }
}

extension TernTests {
    @Suite struct HTTPVersions {
        // MARK: - The types (no server)

        @Test func versionsPrintAsStatusLinesNameThem() {
            #expect(Response.HTTPVersion.http1_0.description == "HTTP/1.0")
            #expect(Response.HTTPVersion.http1_1.description == "HTTP/1.1")
            #expect(Response.HTTPVersion.http2.description == "HTTP/2")
            #expect(Response.HTTPVersion(major: 3, minor: 0).description == "HTTP/3")
            #expect(Response.HTTPVersion.http2 == Response.HTTPVersion(major: 2, minor: 0))
            #expect(Response.HTTPVersion.http1_0 < .http1_1)
            #expect(Response.HTTPVersion.http1_1 < .http2)
            #expect(Response.HTTPVersion.http2.minor == 0)
        }

        @Test func preferenceDefaultsToAutomaticAndIsKept() {
            let request = Request(url: URL(string: "https://example.com/")!)
            #expect(request.httpVersion == .automatic)
            for preference in Request.HTTPVersionPreference.allCases {
                request.httpVersion = preference
                #expect(request.httpVersion == preference)
            }
            #expect(request.responseHTTPVersion == nil)
            #expect(Request.HTTPVersionPreference.http2PriorKnowledge.description
                == "HTTP/2 with prior knowledge")
        }

        @Test func engineTakesTheOpenWhenFullSetting() throws {
            #expect(!Engine.Configuration().opensHTTP2ConnectionWhenFull)
            let engine = try Engine(configuration: .init(opensHTTP2ConnectionWhenFull: true))
            #expect(engine.configuration.opensHTTP2ConnectionWhenFull)
        }

        // MARK: - HTTP/1 servers (the engine's HTTP/1.1 as it is)

        @Test func anHTTP1ServerAnswersInHTTP1WhateverThePreference() throws {
            let servers = try Servers.get()
            let ca = try servers.must("CA_PEM")
            // No TLS: no ALPN, so .automatic and .http2 speak HTTP/1.1 (no h2c upgrade).
            for preference in [Request.HTTPVersionPreference.automatic, .http1_1, .http2] {
                let request = Request(url: servers.nginx("/1k.bin"))
                request.httpVersion = preference
                let response = try request.executeAndWait()
                #expect(response.httpVersion == .http1_1, "\(preference)")
                #expect(response.httpMinorVersion == 1)
                #expect(request.responseHTTPVersion == .http1_1)
                #expect(request.responseHTTPMinorVersion == 1)
                #expect(response.data.count == 1024)
            }
            // TLS_PORT's nginx offers http/1.1 alone.
            for preference in [Request.HTTPVersionPreference.automatic, .http1_1, .http2] {
                let request = Request(url: servers.https("TLS_PORT", "/1k.bin"))
                request.tls = TLSOptions(caFile: ca)
                request.httpVersion = preference
                let response = try request.executeAndWait()
                #expect(response.httpVersion == .http1_1, "\(preference)")
                #expect(response.sentRequestHead?.hasPrefix("GET /1k.bin HTTP/1.1\r\n") == true)
            }
        }

        @Test func http10WinsOverThePreference() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.nginx("/1k.bin"))
            request.http10 = true
            request.httpVersion = .http2PriorKnowledge
            let response = try request.executeAndWait()
            #expect(response.sentRequestHead?.hasPrefix("GET /1k.bin HTTP/1.0\r\n") == true)
            #expect(response.httpVersion.major == 1)
            #expect(response.data.count == 1024)
        }

        @Test func theHeadHandlerSeesTheResponseVersion() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.nginx("/1k.bin"))
            let seen = Recorder<Response.HTTPVersion?>()
            request.headHandler = { request in
                seen.append(request.responseHTTPVersion)
                return true
            }
            _ = try request.executeAndWait()
            #expect(seen.all == [.http1_1])
        }

        @Test func aResponseFromTheCacheSaysHTTP1_1() async throws {
            let servers = try Servers.get()
            let folder = temporaryPath("h2cache")
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let cache = try HTTPCache(folder: folder, sizeLimit: 1 << 20)
            // nginx's /cached/ paths answer with max-age=3600: the second GET is a hit.
            let url = servers.nginx("/cached/1k.bin?h2-\(UUID().uuidString.prefix(8))")
            for round in 0..<2 {
                let request = Request(url: url)
                request.cache = cache
                let response = try await request.response()
                #expect(response.isFromCache == (round == 1))
                #expect(response.httpVersion == .http1_1)
            }
        }

        // MARK: - HTTP/2 servers (need the engine's HTTP/2)

        @Test func automaticNegotiatesHTTP2OverTLS() async throws {
            let servers = try Servers.get()
            let request = Request(url: try servers.h2TLS("/1k.bin"))
            request.tls = TLSOptions(caFile: try servers.must("CA_PEM"))
            let response = try await request.response()
            #expect(response.httpVersion == .http2)
            #expect(response.httpMinorVersion == 0)
            #expect(request.responseHTTPVersion == .http2)
            #expect(response.statusCode == 200)
            #expect(sha256(response.data) == servers.sha("SHA_1K"))
            // The head as it went, as curl shows it: HTTP/2, field names in lower case.
            #expect(response.sentRequestHead?.hasPrefix("GET /1k.bin HTTP/2\r\nHost: ") == true)
            #expect(response.sentRequestHead?.contains("\r\nuser-agent: ") == true)
        }

        @Test func http2IsAutomaticOverTLS() async throws {
            let servers = try Servers.get()
            let request = Request(url: try servers.h2TLS("/1k.bin"))
            request.tls = TLSOptions(caFile: try servers.must("CA_PEM"))
            request.httpVersion = .http2
            let response = try await request.response()
            #expect(response.httpVersion == .http2)
            #expect(sha256(response.data) == servers.sha("SHA_1K"))
        }

        @Test func http1_1StaysOnHTTP1OnAnHTTP2Server() async throws {
            let servers = try Servers.get()
            let request = Request(url: try servers.h2TLS("/1k.bin"))
            request.tls = TLSOptions(caFile: try servers.must("CA_PEM"))
            request.httpVersion = .http1_1
            let response = try await request.response()
            #expect(response.httpVersion == .http1_1)
            #expect(response.status.reasonPhrase == "OK")
            #expect(sha256(response.data) == servers.sha("SHA_1K"))
        }

        @Test func http10StaysOnHTTP1OnAnHTTP2Server() async throws {
            let servers = try Servers.get()
            let request = Request(url: try servers.h2TLS("/1k.bin"))
            request.tls = TLSOptions(caFile: try servers.must("CA_PEM"))
            request.http10 = true
            let response = try await request.response()
            #expect(response.httpVersion.major == 1)
            #expect(response.sentRequestHead?.hasPrefix("GET /1k.bin HTTP/1.0\r\n") == true)
        }

        @Test func priorKnowledgeSpeaksH2C() async throws {
            let servers = try Servers.get()
            let request = Request(url: try servers.h2c("/1k.bin"))
            request.httpVersion = .http2PriorKnowledge
            let response = try await request.response()
            #expect(response.httpVersion == .http2)
            #expect(response.statusCode == 200)
            #expect(response.tlsInfo == nil)
            #expect(sha256(response.data) == servers.sha("SHA_1K"))
        }

        @Test func priorKnowledgeOverTLSSpeaksHTTP2() async throws {
            let servers = try Servers.get()
            let request = Request(url: try servers.h2TLS("/1k.bin"))
            request.tls = TLSOptions(caFile: try servers.must("CA_PEM"))
            request.httpVersion = .http2PriorKnowledge
            let response = try await request.response()
            #expect(response.httpVersion == .http2)
            #expect(response.tlsInfo != nil)
        }

        @Test func priorKnowledgeAgainstAnHTTP1ServerFails() async throws {
            let servers = try Servers.get()
            let request = Request(url: servers.nginx("/1k.bin"))
            request.httpVersion = .http2PriorKnowledge
            request.timeouts = Request.Timeouts(connect: 5, headers: 5, body: 5, total: 10)
            await #expect(throws: TernError.self) { try await request.response() }
        }

        @Test func requestsOfDifferentPreferencesShareNoConnection() async throws {
            let servers = try Servers.get()
            let engine = try Engine()
            let ca = try servers.must("CA_PEM")
            var versions: [Response.HTTPVersion] = []
            for preference in [Request.HTTPVersionPreference.automatic, .http1_1, .automatic, .http1_1] {
                let request = Request(url: try servers.h2TLS("/1k.bin"))
                request.engine = engine
                request.tls = TLSOptions(caFile: ca)
                request.httpVersion = preference
                versions.append(try await request.response().httpVersion)
            }
            #expect(versions == [.http2, .http1_1, .http2, .http1_1])
            #expect(engine._stats.connectionsOpened == 2)
        }

        @Test func aQueuedRequestKeepsItsPreference() throws {
            let servers = try Servers.get()
            let queue = RequestQueue(configuration: .init(maxSimultaneous: 1))
            let request = Request(url: try servers.h2c("/1k.bin"))
            request.httpVersion = .http2PriorKnowledge
            let done = DispatchSemaphore(value: 0)
            request.onCompletion { _ in done.signal() }
            queue.add(request)
            #expect(done.wait(timeout: .now() + 20) == .success)
            #expect(request.responseHTTPVersion == .http2)
        }
    }
}
