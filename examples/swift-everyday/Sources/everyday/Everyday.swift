// The everyday tasks the README shows, as one program:
//
//     everyday NGINX_URL FAULT_URL      (such as http://127.0.0.1:8080 http://127.0.0.1:8081)
//
// NGINX_URL serves /1k.bin and /100m.bin; FAULT_URL is Tern's test fault server, whose /echo
// answers with the request it received as JSON and whose /slowheaders answers after 3 s
// (Tests/TestServer/README.md). scripts/test.sh starts both and runs this program, which
// checks every result and exits 1 when any task fails.
//
// Each region between the README markers below is copied verbatim into README.md;
// scripts/check-readme.sh fails when they differ.

import Foundation
import Tern

// README: begin
/// What the fault server's /echo answers (a JSON object), as far as this program reads it.
struct Echo: Decodable, Sendable {
    let method: String
    let target: String
    let headers: [[String]]  // [name, value] pairs, in the order received
    let bodyLength: Int

    enum CodingKeys: String, CodingKey {
        case method, target, headers
        case bodyLength = "body_length"
    }

    func header(_ name: String) -> String? {
        headers.first { $0.first?.lowercased() == name.lowercased() }?.last
    }
}

struct NewUser: Encodable, Sendable {
    let name: String
    let age: Int
}

/// Collects what `@Sendable` handlers receive, under a lock: handlers run on the request's
/// `callbackQueue` (a global queue by default), not on the thread that set them.
final class Collected<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Value] = []

    func append(_ value: Value) { lock.withLock { values.append(value) } }
    var all: [Value] { lock.withLock { values } }
}
// README: end

/// A check that did not hold.
struct Failure: Error, CustomStringConvertible {
    let description: String
}

func expect(_ condition: Bool, _ what: @autoclosure () -> String) throws {
    if !condition { throw Failure(description: what()) }
}

@main
struct Everyday {
    static func main() async {
        let arguments = CommandLine.arguments
        guard arguments.count == 3, let nginx = URL(string: arguments[1]),
            let fault = URL(string: arguments[2])
        else {
            print("usage: everyday NGINX_URL FAULT_URL")
            exit(2)
        }
        let directory = FileManager.default.temporaryDirectory
            .appending(path: "tern-everyday-\(ProcessInfo.processInfo.processIdentifier)")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let tasks: [(String, () async throws -> Void)] = [
            ("JSON GET, form POST and JSON POST", { try await json(fault: fault) }),
            ("download with progress", { try await download(nginx: nginx, into: directory) }),
            ("200 concurrent GETs", { try await concurrent(nginx: nginx) }),
            ("a queue of downloads", { try await queue(nginx: nginx, into: directory) }),
            ("cancel", { try await cancel(fault: fault) }),
            ("bad input", { try await badInput() }),
        ]
        var failed = 0
        for (name, task) in tasks {
            print("== \(name)")
            let start = Date()
            do {
                try await task()
                print("ok: \(name) (\(String(format: "%.2f", Date().timeIntervalSince(start))) s)")
            } catch {
                failed += 1
                print("FAILED: \(name): \(error)")
            }
        }
        print(failed == 0 ? "everyday: all \(tasks.count) tasks passed" : "everyday: \(failed) of \(tasks.count) tasks FAILED")
        exit(failed == 0 ? 0 : 1)
    }

    static func json(fault: URL) async throws {
        // README: begin
        let api = Client(baseURL: fault)  // parameters URL-encoded: the query of a GET, the body of a POST
        let echo = try await api.get("echo", parameters: ["q": "tern"], as: .json(Echo.self))
        print(echo.method, echo.target)  // GET /echo?q=tern

        let form = try await api.post("echo", parameters: ["name": "Ada"], as: .json(Echo.self))
        print(form.method, form.header("Content-Type") ?? "")  // POST application/x-www-form-urlencoded

        let post = Request(url: fault.appending(path: "echo"), method: .post)
        post.requestBody = try .json(NewUser(name: "Ada", age: 36))
        let created = try await post.response(as: .json(Echo.self))
        print(created.header("Content-Type") ?? "", created.bodyLength)  // application/json 23
        // README: end
        try expect(echo.method == "GET" && echo.target == "/echo?q=tern", "GET echoed \(echo)")
        try expect(form.method == "POST", "form POST echoed \(form)")
        try expect(form.header("Content-Type") == "application/x-www-form-urlencoded", "form \(form)")
        try expect(form.bodyLength == "name=Ada".utf8.count, "form body \(form.bodyLength) bytes")
        try expect(created.header("Content-Type") == "application/json", "JSON POST \(created)")
        try expect(created.bodyLength == #"{"name":"Ada","age":36}"#.utf8.count, "JSON body \(created.bodyLength) bytes")
    }

    static func download(nginx: URL, into directory: URL) async throws {
        // README: begin
        let request = Request(url: nginx.appending(path: "100m.bin"))
        request.downloadFileURL = directory.appending(path: "100m.bin")  // 100m.bin.part until complete
        request.resume = true  // run again after a failure: continues the .part file
        request.progressInterval = 0.2  // seconds between progress events, at most
        let events = Collected<Request.Progress>()
        request.progressHandler = { _, progress in  // on request.callbackQueue: .global() by default
            events.append(progress)
            print(progress.bytesReceived, "of", progress.bytesExpected ?? 0, "bytes")
        }
        let response = try await request.response()
        print(response.statusCode, response.downloadFile ?? "", response.bytesReceived)
        // README: end
        let file = directory.appending(path: "100m.bin")
        let size = try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int
        try expect(response.statusCode == 200, "status \(response.statusCode)")
        try expect(size == 100 << 20, "the file has \(size ?? -1) bytes")
        try expect(!FileManager.default.fileExists(atPath: file.path + ".part"), ".part file left")
        let last = events.all.last
        try expect(last?.bytesReceived == 100 << 20 && last?.bytesExpected == 100 << 20,
                   "last progress event \(String(describing: last))")
    }

    static func concurrent(nginx: URL) async throws {
        // README: begin
        let url = nginx.appending(path: "1k.bin")
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<200 {
                group.addTask { try await Request(url: url).response().statusCode }
            }
            return try await group.reduce(into: [Int: Int]()) { counts, status in counts[status, default: 0] += 1 }
        }
        print(statuses)  // [200: 200]; at most 6 connections per origin, the others wait their turn
        // README: end
        try expect(statuses == [200: 200], "statuses \(statuses)")
    }

    static func queue(nginx: URL, into directory: URL) async throws {
        let names = ["1k.bin", "64k.txt", "100m.bin", "empty.bin"]
        // README: begin
        let queue = RequestQueue(maxSimultaneous: 2)  // at most 2 running, the others wait
        let events = queue.events  // or queue.eventHandler, on the queue's DispatchQueue
        for name in names {
            let request = Request(url: nginx.appending(path: name))
            request.downloadFileURL = directory.appending(path: "queued-" + name)
            queue.add(request, priority: name == "1k.bin" ? .high : .normal)
        }
        for await event in events {
            switch event {
            case .finished(let request): print("done:", request.url.lastPathComponent)
            case .failed(let request, let error): print("failed:", request.url, error)
            case .progress(let progress): print(progress.requestsFinished, "of", progress.requestsTotal)
            case .allFinished: print("all done:", queue.progress.percent)  // 100
            default: break
            }
            if case .allFinished = event { break }
        }
        // README: end
        try expect(queue.progress.percent == 100, "percent \(queue.progress.percent)")
        try expect(queue.progress.requestsFinished == names.count, "\(queue.progress)")
        for name in names {
            let path = directory.appending(path: "queued-" + name).path
            try expect(FileManager.default.fileExists(atPath: path), "\(name) was not downloaded")
        }
    }

    static func cancel(fault: URL) async throws {
        let start = Date()
        // README: begin
        let request = Request(url: fault.appending(path: "slowheaders"))  // answers after 3 s
        let task = Task { try await request.response() }
        try await Task.sleep(for: .milliseconds(200))
        task.cancel()  // cancelling the task cancels the request; request.cancel() works from anywhere
        do {
            _ = try await task.value
        } catch TernError.cancelled {
            print("cancelled:", request.isCancelled)  // cancelled: true
        }
        // README: end
        let elapsed = Date().timeIntervalSince(start)
        try expect(request.isCancelled, "the request was not cancelled")
        try expect(elapsed < 2, "the cancel took \(elapsed) s")
    }

    static func badInput() async throws {
        // README: begin
        print(Request(string: "not a url") as Any)  // nil: only absolute http(s) URLs with a host
        let refused = Request(url: URL(string: "http://127.0.0.1:1/")!)  // nothing listens on port 1
        do {
            _ = try await refused.response()
        } catch {
            print(error.localizedDescription)
            // connect to 127.0.0.1:1: connection refused [ECONNREFUSED, connect phase]
        }
        // README: end
        try expect(Request(string: "not a url") == nil, "\"not a url\" was accepted")
        try expect(refused.error == .connectionRefused, "error \(String(describing: refused.error))")
        let text = refused.error?.localizedDescription ?? ""
        try expect(text.contains("127.0.0.1") && text.contains("connect"), "description \(text)")
    }
}
