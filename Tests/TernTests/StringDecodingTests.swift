// Request.string / Response.string: the charset comes from Content-Type; ISO-8859-1 when none
// is given (UTF-8 for JSON types).

import Foundation
import Testing
@testable import Tern

extension TernTests {
    @Suite struct StringDecoding {
        let latin1: Data = Data([0x63, 0x61, 0x66, 0xE9])  // "café" in ISO-8859-1
        let utf8: Data = Data("café ✓".utf8)

        @Test func latin1WhenNoCharsetIsGiven() {
            #expect(decodeText(latin1, contentType: "text/plain") == "café")
            #expect(decodeText(latin1, contentType: nil) == "café")
            #expect(decodeText(utf8, contentType: "text/html") == "cafÃ© â\u{9C}\u{93}")
        }

        @Test func charsetParameter() {
            #expect(decodeText(utf8, contentType: "text/plain; charset=utf-8") == "café ✓")
            #expect(decodeText(utf8, contentType: "text/plain;charset=\"UTF-8\"") == "café ✓")
            #expect(decodeText(utf8, contentType: "text/plain; format=flowed; Charset=utf8") == "café ✓")
            #expect(decodeText(latin1, contentType: "text/plain; charset=ISO-8859-1") == "café")
            let utf16 = "hé".data(using: .utf16BigEndian)!
            #expect(decodeText(utf16, contentType: "text/plain; charset=utf-16be") == "hé")
            #expect(decodeText(Data("plain".utf8), contentType: "text/plain; charset=us-ascii") == "plain")
        }

        @Test func invalidBytesGiveNil() {
            #expect(decodeText(latin1, contentType: "text/plain; charset=utf-8") == nil)
        }

        @Test func unknownCharsetFallsBackToLatin1() {
            #expect(decodeText(latin1, contentType: "text/plain; charset=x-unknown") == "café")
        }

        @Test func jsonIsUTF8ByDefault() {
            #expect(decodeText(utf8, contentType: "application/json") == "café ✓")
            #expect(decodeText(utf8, contentType: "application/problem+json") == "café ✓")
        }

        @Test func fromTheServer() async throws {
            let servers = try Servers.get()
            let request = Request(url: servers.nginx("/64k.txt"))
            request.callbackQueue = .global()
            let response = try await request.response()
            let expected = String(decoding: try fixture(servers, "64k.txt"), as: UTF8.self)
            #expect(response.string == expected)
            #expect(request.string == expected)
        }
    }
}
