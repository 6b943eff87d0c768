// The floor driver's parts: see main.swift.

import BenchSupport
import CTern
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

final class LoopExecutor: TaskExecutor, @unchecked Sendable {
    let engine: OpaquePointer
    private let lock = Mutex<[UnownedJob]>([])
    /// The drain's jobs: swapped with the queue under the lock, so no buffer is allocated per
    /// drain (as Engine.executor does).
    private var running: [UnownedJob] = []
    init(engine: OpaquePointer) { self.engine = engine }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let first = lock.withLock { jobs in
            jobs.append(unowned)
            return jobs.count == 1
        }
        guard first else { return }
        _ = tern_engine_call(engine, { context in
            let me = Unmanaged<LoopExecutor>.fromOpaque(context!).takeRetainedValue()
            me.drain()
        }, Unmanaged.passRetained(self).toOpaque())
    }

    func drain() {
        lock.withLock { jobs in swap(&jobs, &running) }
        for job in running { job.runSynchronously(on: asUnownedTaskExecutor()) }
        // Emptied one by one: `removeAll(keepingCapacity:)` went through the generic
        // replaceSubrange, some 60 instructions for the usual one job.
        while running.popLast() != nil {}
    }
}

struct FloorResponse: Sendable {
    var status: Int
    var body: [UInt8]
}

struct FloorError: Error { var code: Int32 }

typealias FloorContinuation = UnsafeContinuation<FloorResponse, any Error>

final class Pending {
    let continuation: FloorContinuation
    init(_ continuation: FloorContinuation) { self.continuation = continuation }
}

let completed: tern_complete_cb = { req, status, context in
    let pending = Unmanaged<Pending>.fromOpaque(context!).takeRetainedValue()
    guard status == 0, let req else {
        if let req { tern_request_free(req) }
        pending.continuation.resume(throwing: FloorError(code: status))
        return
    }
    var length = 0
    let body = tern_request_get_body(req, &length)
    let bytes = body.map { Array(UnsafeRawBufferPointer(start: $0, count: length)) } ?? []
    let response = FloorResponse(status: Int(tern_request_get_status(req)), body: bytes)
    tern_request_free(req)
    pending.continuation.resume(returning: response)
}

func get(_ url: String, engine: OpaquePointer, caFile: String?) async throws -> FloorResponse {
    try await withUnsafeThrowingContinuation { (continuation: FloorContinuation) in
        var req: OpaquePointer?
        guard tern_request_new(&req) == 0, let req else {
            continuation.resume(throwing: FloorError(code: -1))
            return
        }
        _ = tern_request_set_url(req, url)
        if let caFile { _ = tern_request_set_tls_ca_file(req, caFile) }
        let context = Unmanaged.passRetained(Pending(continuation)).toOpaque()
        _ = tern_request_set_complete_cb(req, completed, context)
        let r = tern_engine_submit(engine, req)
        if r != 0 {
            Unmanaged<Pending>.fromOpaque(context).release()
            tern_request_free(req)
            continuation.resume(throwing: FloorError(code: r))
        }
    }
}

