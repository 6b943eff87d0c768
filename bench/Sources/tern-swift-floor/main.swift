// tern-swift-floor — an experiment, not a client: the least a Swift async GET can cost over
// Tern's engine. No Request, Plan or Execution: each GET is one `withUnsafeThrowingContinuation`
// around tern_request_new/set_url/submit, resumed from the complete callback with the status
// and a copy of the body, its task running on the engine's loop thread (a TaskExecutor over
// tern_engine_call, as Engine.executor). bench/run does not run it by default; it measures how
// close to tern-c any Swift async API over this engine can come (bench/HISTORY-swift-path.md).
//
//   tern-swift-floor get URL N C

import BenchSupport
import CTern
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

let driver = Driver.parse(name: "tern-swift-floor")
guard case .get(let url, let count, let connections) = driver.workload else {
    exitWith(.unsupported, "tern-swift-floor: GET loads only")
}
var config: OpaquePointer?
_ = tern_config_new(&config)
_ = tern_config_set_max_connections_per_origin(config, UInt32(connections))
var made: OpaquePointer?
guard tern_engine_new(&made, config) == 0, let engine = made else {
    exitWith(.failed, "tern-swift-floor: engine")
}
tern_config_free(config)
let executor = LoopExecutor(engine: engine)
nonisolated(unsafe) let sharedEngine = engine
let counter = RequestCounter(total: count)
let start = monotonicNow()
await runLoad(count: count, connections: connections, inflight: nil, counter: counter, preference: executor) {
    do {
        let response = try await get(url, engine: sharedEngine, caFile: driver.caFile)
        counter.finish(bytes: response.body.count, error: response.status == 200 ? nil : "status \(response.status)")
    } catch {
        counter.finish(bytes: 0, error: "\(error)")
    }
}
let elapsed = monotonicNow() - start
let result = counter.snapshot
driver.report(elapsed: elapsed, requests: result.completed, bytes: result.bytes)
exit(result.failures > 0 ? ExitCode.failed.rawValue : 0)
