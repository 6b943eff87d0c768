// A response head's fields are copied from the engine as one block and decoded when first
// read: the decoded fields must be the ones the block holds, in order, repeats and odd bytes
// included, and the request head must come back as sent.

import HTTPTypes
import Testing
@testable import Tern

extension TernTests {
    @Suite struct HeadFieldsDecoding {
        /// The engine's layout: "name\0value\0" per field.
        func block(_ fields: [(String, [UInt8])]) -> [UInt8] {
            fields.flatMap { Array($0.0.utf8) + [0] + $0.1 + [0] }
        }

        func decode(_ bytes: [UInt8], sent: String?) -> ResponseHead {
            func head(_ block: UnsafeRawBufferPointer, _ sent: UnsafeRawBufferPointer?) -> ResponseHead {
                ResponseHead(
                    status: 200, reason: "OK", httpVersion: .http1_1, block: block, sentHead: sent,
                    contentLength: nil, isReused: false)
            }
            return bytes.withUnsafeBytes { block in
                if let sent {
                    var copy = sent
                    return copy.withUTF8 { head(block, UnsafeRawBufferPointer($0)) }
                }
                return head(block, nil)
            }
        }

        @Test func fieldsComeBackInOrderWithRepeatsAndEmptyValues() {
            let head = decode(
                block([
                    ("Content-Type", Array("text/plain".utf8)), ("Set-Cookie", Array("a=1".utf8)),
                    ("X-Empty", []), ("set-cookie", Array("b=2".utf8)),
                ]), sent: "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
            let fields = head.fields
            #expect(fields.count == 4)
            #expect(fields[.contentType] == "text/plain")
            #expect(fields[values: .setCookie] == ["a=1", "b=2"])
            #expect(fields[HTTPField.Name("X-Empty")!] == "")
            #expect(fields.map(\.name.rawName) == ["Content-Type", "Set-Cookie", "X-Empty", "set-cookie"])
            #expect(head.fields == fields)  // decoded once, the same afterwards
            #expect(head.sentHead == "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        }

        @Test func bytesOutsideASCIIAreKeptLeniently() {
            let head = decode(block([("X-Name", [0x63, 0x61, 0x66, 0xE9])]), sent: nil)
            let field = head.fields.first
            #expect(field?.name.rawName == "X-Name")
            #expect(Array(field?.value.utf8 ?? "".utf8).count >= 4)
            #expect(head.sentHead == nil)
        }

        @Test func anEmptyBlockHasNoFields() {
            #expect(decode([], sent: nil).fields.isEmpty)
            let known = ResponseHead(
                status: 504, reason: "Gateway Timeout", httpVersion: .http1_1,
                fields: [.contentType: "a/b"], contentLength: 0, isReused: false)
            #expect(known.fields[.contentType] == "a/b")
            #expect(known.sentHead == nil)
        }
    }
}
