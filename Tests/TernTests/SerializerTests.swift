// Serializers and the Client: parameters URL-encoded into queries and bodies or sent as JSON,
// responses validated (status, content type) and turned into Data, String or Decodable values,
// and Client(baseURL:) with its per-method conveniences.

import Foundation
import HTTPTypes
import Testing
@testable import Tern

/// The part of faultserver's /echo a Decodable test reads.
struct EchoDocument: Decodable, Sendable {
    var method: String
    var target: String
    var path: String
    var bodyLength: Int
    var bodySHA256: String
    var headers: [[String]]

    enum CodingKeys: String, CodingKey {
        case method, target, path, headers
        case bodyLength = "body_length"
        case bodySHA256 = "body_sha256"
    }

    func header(_ name: String) -> [String] {
        headers.filter { $0.first?.lowercased() == name.lowercased() }.compactMap { $0.last }
    }
}

struct Search: Encodable, Sendable {
    var q: String
    var page: Int
    var exact: Bool
    var tags: [String]
    var range: [String: Double]
    var missing: String?
}

extension TernTests {
    @Suite struct Serializers {
        @Test func urlEncodingFlattensEncodableValues() throws {
            let form = try URLEncodedRequestSerializer.form(from: Search(
                q: "a b&c", page: 2, exact: true, tags: ["x", "y"], range: ["max": 2.5, "min": 1]))
            #expect(form.encodedString
                == "exact=true&page=2&q=a+b%26c&range%5Bmax%5D=2.5&range%5Bmin%5D=1&tags=x&tags=y")
            let ordered: URLEncodedForm = ["z": "1", "a": "2", "z ": "3"]
            #expect(try URLEncodedRequestSerializer.form(from: ordered) == ordered, "a form keeps its order")
            #expect(throws: TernError.invalidArgument) {
                try URLEncodedRequestSerializer.form(from: [1, 2, 3])
            }
        }

        @Test func serializersPutParametersInQueryOrBody() async throws {
            let servers = try Servers.get()
            let get = Request(url: servers.fault("/echo?keep=1"))
            try get.setParameters(["q": "tern client"])
            let getEcho = try await get.response(as: .json(EchoDocument.self))
            #expect(getEcho.target == "/echo?keep=1&q=tern+client")
            #expect(getEcho.bodyLength == 0)

            let post = Request(url: servers.fault("/echo"), method: .post)
            try post.setParameters(["q": "tern client", "n": "1"])
            let postEcho = try await post.response(as: .json(EchoDocument.self))
            #expect(postEcho.target == "/echo")
            #expect(postEcho.bodySHA256 == sha256(Data("n=1&q=tern+client".utf8)))
            #expect(postEcho.header("Content-Type") == ["application/x-www-form-urlencoded"])

            let forced = Request(url: servers.fault("/echo"), method: .post)
            try forced.setParameters(["a": "1"], using: URLEncodedRequestSerializer(destination: .query))
            #expect(try await forced.response(as: .json(EchoDocument.self)).target == "/echo?a=1")

            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            let json = Request(url: servers.fault("/echo"), method: .patch)
            let value = Search(q: "x", page: 1, exact: false, tags: [], range: [:])
            try json.setParameters(value, using: JSONRequestSerializer(encoder: encoder))
            let jsonEcho = try await json.response(as: .json(EchoDocument.self))
            #expect(jsonEcho.method == "PATCH")
            #expect(jsonEcho.header("Content-Type") == ["application/json"])
            #expect(jsonEcho.bodySHA256 == sha256(try encoder.encode(value)))

            let body = Request(url: servers.fault("/echo"), method: .post)
            body.requestBody = try .json(["k": "v"])
            #expect(try await body.response(as: .json(EchoDocument.self)).bodyLength == 9)
        }

        @Test func responseSerializersAndValidation() async throws {
            let servers = try Servers.get()
            let text = try await Request(url: servers.nginx("/64k.txt")).response(as: .string)
            #expect(Data(text.utf8) == (try fixture(servers, "64k.txt")))
            let data = try await Request(url: servers.nginx("/1k.bin")).response(as: .data)
            #expect(data == (try fixture(servers, "1k.bin")))

            // A 404 fails validation with the response attached.
            do {
                _ = try await Request(url: servers.fault("/status/404?size=10")).response(as: .data)
                Issue.record("a 404 passed validation")
            } catch let error as ResponseError {
                #expect(error.reason == .unacceptableStatus)
                #expect(error.statusCode == 404)
                #expect(error.response.data == pattern(10))
                #expect(error.message.contains("404"))
            }

            // JSON expected, octet-stream received.
            do {
                _ = try await Request(url: servers.nginx("/1k.bin")).response(as: .json(EchoDocument.self))
                Issue.record("octet-stream passed JSON validation")
            } catch let error as ResponseError {
                #expect(error.reason == .unacceptableContentType)
                #expect(error.message.contains("application/octet-stream"))
            }

            // JSON of the wrong shape.
            struct Wrong: Decodable, Sendable { var nothing: Int }
            do {
                _ = try await Request(url: servers.fault("/echo")).response(as: .json(Wrong.self))
                Issue.record("decoded the wrong shape")
            } catch let error as ResponseError {
                #expect(error.reason == .serializationFailed)
                #expect(error.underlyingError is DecodingError)
            }

            // Validations compose and run on plain responses too.
            let response = try await Request(url: servers.fault("/status/201")).response()
            #expect(throws: Never.self) { try response.validate() }
            #expect(throws: ResponseError.self) { try response.validate(.statusCodes([200])) }
            let json = try await Request(url: servers.fault("/echo")).response()
            #expect(throws: Never.self) {
                try json.validate(ResponseValidation.statusCodes(200..<300).and(.contentTypes(["application/*"])))
            }
            #expect(throws: ResponseError.self) { try json.validate(.contentTypes(["text/*"])) }
            #expect(throws: Never.self) { try json.validate(.contentTypes(["*/*"])) }
            let custom = ResponseValidation { response in
                if response.headerFields[HTTPField.Name("X-Echo-Method")!] != "GET" {
                    throw ResponseError(reason: .init(rawValue: "custom"), message: "not a GET", response: response)
                }
            }
            #expect(throws: Never.self) { try json.validate(custom) }
            #expect(try json.decode(EchoDocument.self).method == "GET")
        }

        @Test func clientWithBaseURL() async throws {
            let servers = try Servers.get()
            let api = Client(
                baseURL: servers.fault("/nest/api/"), headerFields: [HTTPField.Name("X-Api")!: "1"],
                prepare: { $0.userAgent = "api-test/1" })
            #expect(api.url(for: "echo")?.absoluteString == servers.fault("/nest/api/echo").absoluteString)
            #expect(api.url(for: "/echo?x=1")?.absoluteString == servers.fault("/nest/api/echo?x=1").absoluteString)
            #expect(api.url(for: "http://other.example/x")?.absoluteString == "http://other.example/x")

            let got = try await api.get("echo", parameters: ["q": "a b"], as: .json(EchoDocument.self))
            #expect(got.method == "GET")
            #expect(got.target == "/nest/api/echo?q=a+b")
            #expect(got.header("X-Api") == ["1"])
            #expect(got.header("User-Agent") == ["api-test/1"])

            let posted = try await api.post("echo", parameters: ["name": "Ada"], headers: [HTTPField.Name("X-Api")!: "2"],
                                            as: .json(EchoDocument.self))
            #expect(posted.method == "POST")
            #expect(posted.bodySHA256 == sha256(Data("name=Ada".utf8)))
            #expect(posted.header("X-Api") == ["2"], "the request's own field replaces the client's")

            #expect(try await api.put("echo", parameters: ["a": "1"], as: .json(EchoDocument.self)).method == "PUT")
            #expect(try await api.patch("echo", as: .json(EchoDocument.self)).method == "PATCH")
            let deleted = try await api.delete("echo", parameters: ["id": "7"], as: .json(EchoDocument.self))
            #expect(deleted.method == "DELETE")
            #expect(deleted.target == "/nest/api/echo?id=7")
            let head = try await api.head("echo")
            #expect(head.statusCode == 200)
            #expect(head.data.isEmpty)
            let plain = try await api.get("echo")
            #expect(plain.statusCode == 200)

            await #expect(throws: ResponseError.self) { try await api.get("status/404") }
            let lenient = Client(baseURL: servers.fault("/"), validation: .none)
            #expect(try await lenient.get("status/404").statusCode == 404)

            let json = Client(baseURL: servers.fault("/"), requestSerializer: JSONRequestSerializer())
            let sent = try await json.post("echo", parameters: ["k": [1, 2]], as: .json(EchoDocument.self))
            #expect(sent.header("Content-Type") == ["application/json"])
            #expect(sent.bodySHA256 == sha256(Data(#"{"k":[1,2]}"#.utf8)))
        }
    }
}
