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

        // Tern decodes without Foundation (it links FoundationEssentials only); these compare
        // its decoding with full Foundation's, which this test target links.
        @Test func singleByteCharsetsDecodeAsFoundationDoes() throws {
            let charsets: [(String, String.Encoding)] = [
                ("iso-8859-2", .isoLatin2), ("windows-1250", .windowsCP1250),
                ("windows-1251", .windowsCP1251), ("windows-1252", .windowsCP1252),
                ("windows-1253", .windowsCP1253), ("windows-1254", .windowsCP1254),
                ("macintosh", .macOSRoman), ("us-ascii", .ascii), ("iso-8859-1", .isoLatin1),
            ]
            for (name, encoding) in charsets {
                let contentType = "text/plain; charset=\(name)"
                var valid: [UInt8] = []
                for byte in 0...255 {
                    let data = Data([UInt8(byte)])
                    let expected = String(data: data, encoding: encoding)
                    #expect(decodeText(data, contentType: contentType) == expected, "\(name) \(byte)")
                    if expected != nil { valid.append(UInt8(byte)) }
                }
                let whole = Data(valid)
                #expect(decodeText(whole, contentType: contentType) == String(data: whole, encoding: encoding))
            }
        }

        @Test func unicodeCharsetsDecodeAsFoundationDoes() {
            let samples: [[UInt8]] = [
                [0x68, 0x00, 0xE9, 0x00], [0x00, 0x68, 0x00, 0xE9], [0xFF, 0xFE, 0x68, 0x00],
                [0xFE, 0xFF, 0x00, 0x68], [0xFF, 0xFE, 0x00, 0x00, 0x68, 0, 0, 0], [0x00, 0xD8],
                [0x68, 0x00, 0xE9], [0x3D, 0xD8, 0x00, 0xDE],
            ]
            let charsets: [(String, String.Encoding)] = [
                ("utf-16", .utf16), ("utf-16le", .utf16LittleEndian), ("utf-16be", .utf16BigEndian),
                ("utf-32", .utf32), ("utf-32le", .utf32LittleEndian), ("utf-32be", .utf32BigEndian),
            ]
            for (name, encoding) in charsets {
                for sample in samples {
                    let data = Data(sample)
                    #expect(
                        decodeText(data, contentType: "text/plain; charset=\(name)")
                            == String(data: data, encoding: encoding), "\(name) \(sample)")
                }
            }
        }

        @Test func japaneseCharsets() {
            let text = "こんにちは、世界！ ABC"
            for (name, encoding) in [("shift_jis", String.Encoding.shiftJIS), ("iso-2022-jp", .iso2022JP)] {
                let data = text.data(using: encoding)!
                #expect(decodeText(data, contentType: "text/plain; charset=\(name)") == text)
            }
            // EUC-JP: "日本" (Foundation on Linux decoded no EUC-JP at all).
            #expect(decodeText(Data([0xC6, 0xFC, 0xCB, 0xDC]), contentType: "text/plain; charset=euc-jp") == "日本")
            #expect(decodeText(Data([0x82]), contentType: "text/plain; charset=shift_jis") == nil)
        }

        @Test func textHelpersMatchFoundation() {
            for text in [
                "", " ", "\t a b \t", "\u{A0}x\u{3000}", "\nx\n", " x\r\n ", "é ", "\u{2003}\u{200B}y",
                "\u{1680}\u{202F}\u{205F}z\u{2028}", "\u{200C}q",
            ] {
                #expect(text.trimmingWhitespace() == text.trimmingCharacters(in: .whitespaces), "\(text.debugDescription)")
            }
            for text in ["a%20b", "%E2%9C%93", "%zz", "50%", "%4", "%FF", "plain", "%2f%2F", ""] {
                #expect(text.percentDecoded() == text.removingPercentEncoding, "\(text)")
            }
            for path in ["/tmp/jar", "jar", "/jar", "a/b/", "a//b", "/", "dir/sub/file.txt", "./x"] {
                let split = splitPath(path)
                #expect(split.directory == (path as NSString).deletingLastPathComponent, "\(path)")
                #expect(split.name == (path as NSString).lastPathComponent, "\(path)")
            }
        }

        @Test func mainThreadAsFoundationSeesIt() async {
            #expect(isMainThread() == Thread.isMainThread)
            let onMain = await MainActor.run { (isMainThread(), Thread.isMainThread) }
            #expect(onMain.0 == onMain.1)
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
