// Every request field reaches the wire as it should (checked through faultserver's /echo and
// nginx), and every response field is filled in.

import Dispatch
import Foundation
import HTTPTypes
import Testing
@testable import Tern

extension TernTests {
    @Suite struct Fields {
        func echo(_ request: Request) throws -> Echo {
            request.callbackQueue = .global()
            return try Echo(request.executeAndWait().data)
        }

        @Test func dedicatedHeaderFieldsAndCredentials() throws {
            let servers = try Servers.get()
            let url = URL(string: "http://user:pa%20ss@127.0.0.1:\(servers.faultPort)/echo?x=1#frag")!
            let request = Request(url: url, method: .post)
            request.headerFields[HTTPField.Name("X-Custom")!] = "one"
            request.headerFields[.cacheControl] = "replaced"
            request.userAgent = "TernTest/1"
            request.referrer = "http://example.com/from"
            request.origin = "http://example.com"
            request.cookie = "a=1; b=2"
            request.encoding = "identity"
            request.cacheControl = "max-age=0"
            request.ims = Date(timeIntervalSince1970: 784_111_777)
            request.body = Data("hello".utf8)
            // URL credentials answer challenges; Basic alone sends them at once (no challenge
            // comes from /echo).
            request.authenticationSchemes = .basic
            let echo = try echo(request)
            #expect(echo.method == "POST")
            #expect(echo.target == "/echo?x=1")
            #expect(echo.headers("Authorization") == ["Basic " + Data("user:pa ss".utf8).base64EncodedString()])
            #expect(echo.headers("X-Custom") == ["one"])
            #expect(echo.headers("User-Agent") == ["TernTest/1"])
            #expect(echo.headers("Referer") == ["http://example.com/from"])
            #expect(echo.headers("Origin") == ["http://example.com"])
            #expect(echo.headers("Cookie") == ["a=1; b=2"])
            #expect(echo.headers("Content-Encoding") == ["identity"])
            #expect(echo.headers("Cache-Control") == ["max-age=0"])
            #expect(echo.headers("If-Modified-Since") == ["Sun, 06 Nov 1994 08:49:37 GMT"])
            #expect(echo.headers("Host") == ["127.0.0.1:\(servers.faultPort)"])
            #expect(echo.bodyLength == 5)
            #expect(request.sentRequestHead?.hasPrefix("POST /echo?x=1 HTTP/1.1\r\n") == true)
            #expect(request.sentRequestHead?.contains("user:") == false)
        }

        @Test func explicitAuthorizationWins() throws {
            let servers = try Servers.get()
            let request = Request(url: URL(string: "http://u:p@127.0.0.1:\(servers.faultPort)/echo")!)
            request.headerFields[.authorization] = "Bearer token"
            #expect(try echo(request).headers("Authorization") == ["Bearer token"])
        }

        @Test func sendCacheHeader() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/echo"))
            request.sendCacheHeader = true
            let echo = try echo(request)
            #expect(echo.headers("Cache-Control") == ["no-cache"])
            #expect(echo.headers("Pragma") == ["no-cache"])
        }

        @Test func http10AndPersistence() throws {
            let servers = try Servers.get()
            let old = Request(url: servers.fault("/echo"))
            old.http10 = true
            #expect(try echo(old).version == "HTTP/1.0")

            let closing = Request(url: servers.fault("/echo"))
            closing.persistent = false
            #expect(try echo(closing).headers("Connection") == ["close"])
        }

        @Test func headOnly() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.nginx("/1k.bin"))
            request.headOnly = true
            request.callbackQueue = .global()
            let response = try request.executeAndWait()
            #expect(response.statusCode == 200)
            #expect(response.data.isEmpty)
            #expect(response.contentLength == 1024)
            #expect(response.sentRequestHead?.hasPrefix("HEAD ") == true)
        }

        @Test func bodyFromMemoryAndFromAFileSlice() throws {
            let servers = try Servers.get()
            let bytes = pattern(100_000, from: 7)
            let post = Request(url: servers.fault("/echo"), method: .post)
            post.body = bytes
            let echoed = try echo(post)
            #expect(echoed.bodyLength == 100_000)
            #expect(echoed.bodySHA256 == sha256(bytes))

            let file = temporaryPath("upload")
            _ = FileManager.default.createFile(atPath: file, contents: bytes)
            defer { try? FileManager.default.removeItem(atPath: file) }
            let put = Request(url: servers.fault("/echo"), method: .put)
            put.bodyFile = file
            put.uploadOffset = 1000
            put.uploadEnd = 3000
            let slice = try echo(put)
            #expect(slice.bodyLength == 2000)
            #expect(slice.bodySHA256 == sha256(bytes[1000..<3000]))
        }

        @Test func downloadFileRangeAndResume() throws {
            let servers = try Servers.get()
            let whole = try fixture(servers, "1k.bin")
            let file = temporaryPath("range")
            defer { try? FileManager.default.removeItem(atPath: file) }

            let ranged = Request(url: servers.nginx("/1k.bin"))
            ranged.downloadFile = file
            ranged.downloadOffset = 100
            ranged.downloadEnd = 300
            ranged.callbackQueue = .global()
            let response = try ranged.executeAndWait()
            #expect(response.statusCode == 206)
            #expect(response.offset == 100)
            #expect(response.downloadFile == file)
            #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == whole[100..<300])

            _ = FileManager.default.createFile(atPath: file, contents: whole.prefix(500))
            let resumed = Request(url: servers.nginx("/1k.bin"))
            resumed.downloadFile = file
            resumed.resume = true
            resumed.callbackQueue = .global()
            let rest = try resumed.executeAndWait()
            #expect(rest.statusCode == 206)
            #expect(rest.bytesReceived == 524)
            #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == whole)
            #expect(resumed.progress.bytesReceived == 1024)
        }

        @Test func responseFields() throws {
            let servers = try Servers.get()
            let engine = try Engine()
            func get() throws -> (Request, Response) {
                let request = Request(url: servers.nginx("/1k.bin"))
                request.engine = engine
                request.callbackQueue = .global()
                request.tag = 7
                request.userData = "mine"
                return (request, try request.executeAndWait())
            }
            let (first, response) = try get()
            #expect(response.statusCode == 200)
            #expect(response.status.reasonPhrase == "OK")
            #expect(response.httpMinorVersion == 1)
            #expect(response.contentLength == 1024)
            #expect(response.bytesReceived == 1024)
            #expect(response.headerFields[HTTPField.Name("X-Connection")!] != nil)
            #expect(response.encoding == nil)
            #expect(!response.isFromCache)
            #expect(response.attempts == 1)
            #expect(response.timings.connected != nil && response.timings.headers != nil)
            #expect(response.timings.total >= response.timings.headers ?? 0)
            #expect(first.statusCode == 200)
            #expect(first.status?.code == 200)
            #expect(first.responseHeaders[.contentType] == "application/octet-stream")
            #expect(first.contentLength == 1024)
            #expect(first.offset == 0)
            #expect(first.state == .download)
            #expect(first.progress.percent == 100)
            #expect(first.progress.bytesReceived == 1024)
            #expect(first.progress.bytesExpected == 1024)
            #expect(first.startDate! <= first.endDate!)
            #expect(first.isFinished && !first.isExecuting && !first.isCancelled)
            #expect(first.tag == 7)
            #expect(first.userData as? String == "mine")
            #expect(first.responseHTTPMinorVersion == 1)
            #expect(!first.isReused)
            let (second, again) = try get()
            #expect(again.isReused)
            #expect(second.isReused)
        }
    }
}

extension TernTests.Fields {
    @Test func decodingModes() throws {
        let servers = try Servers.get()
        let text = try fixture(servers, "64k.txt")
        let encodings = Recorder<String?>()
        func get(_ decoding: Request.Decoding) throws -> Response {
            let request = Request(url: servers.nginx("/gzip/64k.txt"))
            request.decoding = decoding
            request.callbackQueue = .global()
            defer { encodings.append(request.responseEncoding) }
            return try request.executeAndWait()
        }
        let automatic = try get(.automatic)
        #expect(automatic.encoding == "gzip")
        #expect(encodings.all == ["gzip"])
        #expect(automatic.data == text)
        let raw = try get(.raw)
        #expect(raw.encoding == "gzip")
        #expect(raw.data.prefix(2) == Data([0x1F, 0x8B]))
        let none = try get(.none)
        #expect(none.encoding == nil)
        #expect(none.data == text)
    }
}
