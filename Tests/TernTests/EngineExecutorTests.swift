// Engine.executor: tasks that prefer it run on the engine's thread, and their requests complete
// there with no thread switch.

import Foundation
import Testing
@testable import Tern

extension TernTests {
    @Suite struct EngineExecutorRuns {
        @Test func tasksRunOnTheEnginesThreadAndTheirRequestsComplete() async throws {
            let servers = try Servers.get()
            let engine = try Engine()
            let url = servers.nginx("/1k.bin")
            // Warm the engine so that it knows its loop thread.
            let warm = Request(url: url)
            warm.engine = engine
            _ = try await warm.response()
            let results = await withTaskGroup(of: (Bool, Bool, Int).self) { group in
                for _ in 0..<50 {
                    group.addTask(executorPreference: engine.executor) {
                        let before = engine.isLoopThread
                        let request = Request(url: url)
                        request.engine = engine
                        let status = (try? await request.response())?.statusCode ?? 0
                        return (before, engine.isLoopThread, status)
                    }
                }
                var all: [(Bool, Bool, Int)] = []
                for await result in group { all.append(result) }
                return all
            }
            #expect(results.count == 50)
            #expect(results.allSatisfy { $0.0 && $0.1 }, "a task left the engine's thread")
            #expect(results.allSatisfy { $0.2 == 200 })
        }

        @Test func aTaskKeepsItsEngineAlive() async throws {
            let servers = try Servers.get()
            let url = servers.nginx("/1k.bin")
            let task = Task {
                let engine = try Engine()
                return try await Task(executorPreference: engine.executor) {
                    let request = Request(url: url)
                    request.engine = engine
                    return try await request.response().statusCode
                }.value
            }
            #expect(try await task.value == 200)
        }
    }
}
