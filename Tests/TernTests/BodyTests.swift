// Request bodies from the Swift API: URL-encoded forms and post values, bodies for every
// method from memory, files and streams, multipart forms streamed from disk (checked part by
// part by faultserver's /multipart), gzip-compressed bodies and Expect: 100-continue.

import Foundation
import HTTPTypes
import Testing
@testable import Tern
import TernFoundation

/// faultserver's /multipart report.
struct MultipartReport {
    struct Part: Equatable, CustomStringConvertible {
        var name: String?
        var fileName: String?
        var contentType: String?
        var size: Int
        var sha256: String

        var description: String {
            "\(name ?? "-") \(fileName ?? "-") \(contentType ?? "-") \(size) \(sha256.prefix(8))"
        }
    }

    let ok: Bool
    let error: String?
    let parts: [Part]

    init(_ data: Data?) throws {
        let object = try JSONSerialization.jsonObject(with: data ?? Data()) as? [String: Any] ?? [:]
        ok = object["ok"] as? Bool ?? false
        error = object["error"] as? String
        parts = (object["parts"] as? [[String: Any]] ?? []).map { part in
            Part(
                name: part["name"] as? String, fileName: part["filename"] as? String,
                contentType: part["content_type"] as? String, size: part["size"] as? Int ?? -1,
                sha256: part["sha256"] as? String ?? "")
        }
    }
}

/// A file of `count` pattern bytes (byte i is i % 251) in the temporary directory.
func patternFile(_ count: Int, name: String = "body") -> String {
    let path = temporaryPath(name)
    _ = FileManager.default.createFile(atPath: path, contents: pattern(count))
    return path
}

extension TernTests {
    @Suite struct Bodies {
        func run(_ request: Request) throws -> Response {
            request.callbackQueue = .global()
            return try request.executeAndWait()
        }

        func echo(_ request: Request) throws -> Echo {
            try Echo(run(request).data)
        }

        // MARK: - Forms

        @Test func urlEncodeFollowsWHATWG() {
            #expect(urlEncode("abcXYZ019*-._") == "abcXYZ019*-._")
            #expect(urlEncode("a b&c=d+e/f?g#h%i~") == "a+b%26c%3Dd%2Be%2Ff%3Fg%23h%25i%7E")
            #expect(urlEncode("ü€😀") == "%C3%BC%E2%82%AC%F0%9F%98%80")
            #expect(urlEncode("\r\n\"'<>") == "%0D%0A%22%27%3C%3E")
            #expect(urlEncode("") == "")
            #expect(urlDecode("a+b%26c%3D%C3%BC%zz%4") == "a b&c=ü%zz%4")
            for text in ["plain", "a b&c=d", "ü€😀 +%", "x=1&y=2"] {
                #expect(urlDecode(urlEncode(text)) == text)
            }
        }

        @Test func formsKeepOrderAndRepeatedNames() {
            var form: URLEncodedForm = ["user": "ada lovelace", "lang": "en"]
            form.add("fr", forName: "lang")
            #expect(form.encodedString == "user=ada+lovelace&lang=en&lang=fr")
            #expect(form.values(forName: "lang") == ["en", "fr"])
            form.set("de", forName: "lang")
            #expect(form.encodedString == "user=ada+lovelace&lang=de")
            form["user"] = nil
            form["x&y"] = "1=2"
            #expect(form.encodedString == "lang=de&x%26y=1%3D2")
            #expect(URLEncodedForm(encoded: "?a=1&b=x+y&a=%C3%BC&c").fields == [
                .init(name: "a", value: "1"), .init(name: "b", value: "x y"),
                .init(name: "a", value: "ü"), .init(name: "c", value: ""),
            ])
        }

        @Test func postValuesAreAURLEncodedPOST() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/echo"))
            request.setPostValue("1", forKey: "a").addPostValue("x y", forKey: "b")
            request.addPostValue("ü", forKey: "b")
            request.setPostValue("2", forKey: "a")
            let echo = try echo(request)
            let expected = "a=2&b=x+y&b=%C3%BC"
            #expect(echo.method == "POST", "post values turn GET into POST")
            #expect(echo.headers("Content-Type") == ["application/x-www-form-urlencoded"])
            #expect(echo.bodyLength == expected.utf8.count)
            #expect(echo.bodySHA256 == sha256(Data(expected.utf8)))

            let put = Request(url: servers.fault("/echo"), method: .put)
            put.requestBody = .form(["k": "v"])
            put.headerFields[.contentType] = "application/x-custom"
            let putEcho = try self.echo(put)
            #expect(putEcho.method == "PUT")
            #expect(putEcho.headers("Content-Type") == ["application/x-custom"], "the caller's field wins")
        }

        // MARK: - Bodies for every method

        @Test func everyMethodCarriesABody() throws {
            let servers = try Servers.get()
            let bytes = pattern(70_000)
            for method in [HTTPRequest.Method.post, .put, .patch, .delete, HTTPRequest.Method("PROPFIND")!] {
                let request = Request(url: servers.fault("/echo"), method: method)
                request.requestBody = .data(bytes, contentType: "application/octet-stream")
                let echo = try echo(request)
                #expect(echo.method == method.rawValue)
                #expect(echo.bodySHA256 == sha256(bytes), "\(method)")
                #expect(echo.headers("Content-Length") == ["70000"])
                #expect(echo.headers("Content-Type") == ["application/octet-stream"])
            }
            let text = Request(url: servers.fault("/echo"), method: .post)
            text.requestBody = .string("héllo")
            let echo = try echo(text)
            #expect(echo.bodyLength == 6)
            #expect(echo.headers("Content-Type") == ["text/plain; charset=utf-8"])
        }

        @Test func fileBodiesAndRanges() throws {
            let servers = try Servers.get()
            let path = patternFile(300_000)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let whole = Request(url: servers.fault("/echo"), method: .put)
            whole.requestBody = .file(path)
            #expect(try echo(whole).bodySHA256 == sha256(pattern(300_000)))

            let range = Request(url: servers.fault("/echo"), method: .post)
            range.requestBody = .file(path, offset: 1000, end: 251_000)
            let echo = try echo(range)
            #expect(echo.bodyLength == 250_000)
            #expect(echo.bodySHA256 == sha256(pattern(250_000, from: 1000)))
            #expect(echo.headers("Content-Length") == ["250000"])

            let missing = Request(url: servers.fault("/echo"), method: .post)
            missing.requestBody = .file("/nonexistent/file")
            #expect(throws: TernError.fileReadFailed) { try run(missing) }

            let both = Request(url: servers.fault("/echo"), method: .post)
            both.body = Data("x".utf8)
            both.requestBody = .data(Data("y".utf8))
            #expect(throws: TernError.invalidArgument) { try run(both) }
        }

        @Test func streamsOfUnknownLengthGoChunked() throws {
            let servers = try Servers.get()
            let path = patternFile(5_000_000)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let request = Request(url: servers.fault("/echo"), method: .post)
            request.requestBody = .stream(try #require(InputStream(fileAtPath: path)))
            let echo = try echo(request)
            #expect(echo.json["chunked"] as? Bool == true)
            #expect(echo.bodyLength == 5_000_000)
            #expect(echo.bodySHA256 == sha256(pattern(5_000_000)))

            let known = Request(url: servers.fault("/echo"), method: .put)
            known.requestBody = .stream(try #require(InputStream(fileAtPath: path)), length: 5_000_000)
            let knownEcho = try self.echo(known)
            #expect(knownEcho.json["chunked"] as? Bool == false)
            #expect(knownEcho.headers("Content-Length") == ["5000000"])
            #expect(knownEcho.bodySHA256 == sha256(pattern(5_000_000)))
        }

        @Test func closureStreams() throws {
            let servers = try Servers.get()
            let produced = Locked(0)
            let total = 3_000_000
            let request = Request(url: servers.fault("/echo"), method: .post)
            request.requestBody = .stream { buffer in
                produced.withLock { done in
                    let n = min(buffer.count, total - done, 7_777)  // odd sizes on purpose
                    for i in 0..<n { buffer[i] = UInt8((done + i) % 251) }
                    done += n
                    return n
                }
            }
            let echo = try echo(request)
            #expect(echo.bodySHA256 == sha256(pattern(total)))
            #expect(echo.json["chunked"] as? Bool == true)

            struct Broken: Error, CustomStringConvertible {
                var description: String { "sensor unplugged" }
            }
            let failing = Request(url: servers.fault("/echo"), method: .post)
            failing.requestBody = .stream { _ in throw Broken() }
            let error = try #require(throws: TernError.self) { try run(failing) }
            #expect(error.code == .fileReadFailed)
            #expect(error.message.contains("sensor unplugged"), "\(error.message)")
        }

        @Test func aStreamIsSentOnlyOnce() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/echo"), method: .post)
            request.requestBody = .stream(InputStream(data: Data("once".utf8)))
            #expect(try echo(request).bodyLength == 4)
            let error = try #require(throws: TernError.self) { try run(request) }
            #expect(error.code == .fileReadFailed)
            #expect(error.message.contains("only once"), "\(error.message)")
        }

        // MARK: - Multipart

        @Test func multipartFormStreamsFilesWithAContentLength() throws {
            let servers = try Servers.get()
            let dir = temporaryPath("mp")
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let photo = dir + "/photo.JPG"
            let notes = dir + "/notes.txt"
            let blob = dir + "/blob.weird"
            _ = FileManager.default.createFile(atPath: photo, contents: pattern(1_000_000))
            _ = FileManager.default.createFile(atPath: notes, contents: Data("line one\nline two\n".utf8))
            _ = FileManager.default.createFile(atPath: blob, contents: pattern(5000))

            var form = MultipartForm()
            form.addField("title", value: "Holiday \"2024\"\r\n")
            form.addFile(at: photo, name: "photo")
            form.addFile(at: photo, name: "slice", fileName: "part.bin", contentType: "application/x-slice",
                         offset: 100, end: 200_100, offsetField: "slice_offset")
            form.addFile(at: blob, name: "blob")
            form.addData(pattern(333), name: "thumb", fileName: "t.png")
            form.append(.field("notes", contentsOf: notes))
            form.addData(Data("{}".utf8), name: "meta", contentType: "application/json")
            let request = Request(url: servers.fault("/multipart"), method: .post)
            request.requestBody = .multipart(form)
            let response = try run(request)
            let report = try MultipartReport(response.data)
            #expect(report.ok, "\(report.error ?? "")")
            #expect(report.parts == [
                .init(name: "title", fileName: nil, contentType: nil, size: 16,
                      sha256: sha256(Data("Holiday \"2024\"\r\n".utf8))),
                .init(name: "photo", fileName: "photo.JPG", contentType: "image/jpeg", size: 1_000_000,
                      sha256: sha256(pattern(1_000_000))),
                .init(name: "slice_offset", fileName: nil, contentType: nil, size: 3, sha256: sha256(Data("100".utf8))),
                .init(name: "slice", fileName: "part.bin", contentType: "application/x-slice", size: 200_000,
                      sha256: sha256(pattern(200_000, from: 100))),
                .init(name: "blob", fileName: "blob.weird", contentType: "application/octet-stream", size: 5000,
                      sha256: sha256(pattern(5000))),
                .init(name: "thumb", fileName: "t.png", contentType: "image/png", size: 333,
                      sha256: sha256(pattern(333))),
                .init(name: "notes", fileName: nil, contentType: nil, size: 18,
                      sha256: sha256(Data("line one\nline two\n".utf8))),
                .init(name: "meta", fileName: nil, contentType: "application/json", size: 2,
                      sha256: sha256(Data("{}".utf8))),
            ], "\(report.parts)")
            let head = try #require(response.sentRequestHead)
            #expect(head.contains("Content-Type: multipart/form-data; boundary=\(form.boundary)\r\n"))
            #expect(head.contains("Content-Length: "), "sizes known: Content-Length up front")
            #expect(!head.contains("Transfer-Encoding"))
        }

        @Test func contentTypesFromExtensions() {
            #expect(MultipartForm.contentType(forPathExtension: "PNG") == "image/png")
            #expect(MultipartForm.contentType(forPathExtension: "json") == "application/json")
            #expect(MultipartForm.contentType(forPathExtension: "txt") == "text/plain")
            #expect(MultipartForm.contentType(forPathExtension: "mp4") == "video/mp4")
            #expect(MultipartForm.contentType(forPathExtension: "") == "application/octet-stream")
            #expect(MultipartForm.contentType(forPathExtension: "xyz") == "application/octet-stream")
        }

        @Test func multipartWithAStreamPartGoesChunked() throws {
            let servers = try Servers.get()
            var form = MultipartForm()
            form.addField("a", value: "1")
            form.append(.stream(InputStream(data: pattern(123_456)), name: "live", fileName: "live.bin"))
            form.addData(pattern(10), name: "tail")
            let request = Request(url: servers.fault("/multipart"), method: .post)
            request.requestBody = .multipart(form)
            let response = try run(request)
            let report = try MultipartReport(response.data)
            #expect(report.ok)
            #expect(report.parts.map(\.size) == [1, 123_456, 10])
            #expect(report.parts[1].sha256 == sha256(pattern(123_456)))
            #expect(report.parts[1].contentType == "application/octet-stream")
            #expect(response.sentRequestHead?.contains("Transfer-Encoding: chunked") == true)
        }

        @Test func multipartWithAClosurePartGoesChunked() throws {
            let servers = try Servers.get()
            let source = Locked(pattern(70_000)[...])
            var form = MultipartForm()
            form.append(.stream(name: "live", fileName: "live.bin") { buffer in
                source.withLock { rest in
                    let n = min(buffer.count, rest.count, 1000)
                    rest.prefix(n).withUnsafeBytes { buffer.copyMemory(from: $0) }
                    rest = rest.dropFirst(n)
                    return n
                }
            })
            let request = Request(url: servers.fault("/multipart"), method: .post)
            request.requestBody = .multipart(form)
            let response = try run(request)
            let report = try MultipartReport(response.data)
            #expect(report.ok)
            #expect(report.parts.map(\.size) == [70_000])
            #expect(report.parts[0].sha256 == sha256(pattern(70_000)))
            #expect(response.sentRequestHead?.contains("Transfer-Encoding: chunked") == true)
        }

        @Test func postValuesFileUploadAndDownloadInOneRequest() throws {
            let servers = try Servers.get()
            let upload = patternFile(2_000_000, name: "upload.bin")
            let download = temporaryPath("answer.json")
            defer {
                try? FileManager.default.removeItem(atPath: upload)
                try? FileManager.default.removeItem(atPath: download)
            }
            var form = MultipartForm()
            form.addFile(at: upload, name: "file")
            let request = Request(url: servers.fault("/multipart"), method: .post)
            request.setPostValue("42", forKey: "id").addPostValue("b", forKey: "tag")
            request.requestBody = .multipart(form)
            request.downloadFile = download
            let response = try run(request)
            #expect(response.statusCode == 200)
            #expect(response.data.isEmpty)
            let report = try MultipartReport(FileManager.default.contents(atPath: download))
            #expect(report.parts.map { $0.name ?? "" } == ["id", "tag", "file"])
            #expect(report.parts[2].sha256 == sha256(file: upload))
            #expect(report.parts[2].fileName == "\(URL(fileURLWithPath: upload).lastPathComponent)")
        }

        // MARK: - Compressed request bodies, Expect: 100-continue

        @Test func compressedBodiesStreamThroughGzip() throws {
            let servers = try Servers.get()
            let path = patternFile(3_000_000)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let echoRequest = Request(url: servers.fault("/echo"), method: .post)
            echoRequest.requestBody = .file(path)
            echoRequest.compressBody = true
            let echo = try echo(echoRequest)
            #expect(echo.headers("Content-Encoding") == ["gzip"])
            #expect(echo.json["chunked"] as? Bool == true)
            #expect((echo.bodyLength ?? 0) > 0 && (echo.bodyLength ?? 0) < 3_000_000)

            // nginx's WebDAV stores the body as sent: gunzip gives back the file.
            let name = "gz-\(UUID().uuidString.prefix(8)).bin"
            let put = Request(url: servers.nginx("/upload/\(name)"), method: .put)
            put.requestBody = .file(path)
            put.compressBody = true
            let status = try run(put).statusCode
            #expect(status == 201 || status == 204)
            let stored = servers.state + "/uploads/upload/" + name
            defer { try? FileManager.default.removeItem(atPath: stored) }
            #expect(shell("gzip -dc '\(stored)' | sha256sum").prefix(64) == sha256(file: path))

            let old = Request(url: servers.fault("/echo"), method: .post)
            old.body = Data("x".utf8)
            old.compressBody = true
            old.http10 = true
            #expect(throws: TernError.invalidArgument) { try run(old) }
        }

        @Test func expectContinue() throws {
            let servers = try Servers.get()
            let body = pattern(2_000_000)
            let normal = Request(url: servers.fault("/echo"), method: .put)
            normal.body = body
            let echo = try echo(normal)
            #expect(echo.headers("Expect") == ["100-continue"], "2 MB is over the 1 MiB default")
            #expect(echo.bodySHA256 == sha256(body))

            let refused = Request(url: servers.fault("/echo?expect=final"), method: .put)
            refused.body = body
            let response = try run(refused)
            #expect(response.isRequestBodySkipped)
            #expect(refused.isRequestBodySkipped)

            let never = Request(url: servers.fault("/echo"), method: .put)
            never.body = body
            never.expectContinue = .never
            #expect(try self.echo(never).headers("Expect").isEmpty)

            // A server that never answers 100: the body goes after the wait.
            let silent = Request(url: servers.fault("/echo?expect=ignore"), method: .post)
            silent.body = Data("small".utf8)
            silent.expectContinue = .init(threshold: 1, wait: 0.2)
            let started = Date()
            let silentEcho = try self.echo(silent)
            #expect(silentEcho.headers("Expect") == ["100-continue"])
            #expect(silentEcho.bodyLength == 5)
            #expect(Date().timeIntervalSince(started) >= 0.15)
        }
    }
}
