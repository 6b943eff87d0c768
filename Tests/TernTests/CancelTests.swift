// Cancelling: from the listener, by cancelling the Swift task, with cancel() and with
// clearDelegatesAndCancel(), and by letting a weakly held owner go.

import Dispatch
import Foundation
import Testing
@testable import Tern

extension TernTests {
    @Suite struct Cancel {
        @Test func fromTheListener() async throws {
            let servers = try Servers.get()
            let events = Recorder<Event>()
            let cancelledAt = Locked<Int?>(nil)
            let request = Request(url: servers.fault("/ok?size=20000000&drip_ms=20&drip_bytes=65536"))
            request.callbackQueue = DispatchQueue(label: "tern.test.cancel")
            request.listener = { _, state, percent in
                events.append(Event(state: state, percent: percent, onQueue: true))
                if state == .download && percent >= 1 {
                    cancelledAt.withLock { $0 = $0 ?? events.count - 1 }
                    return false
                }
                return true
            }
            let started = Date()
            await runToCompletion(request)
            #expect(Date().timeIntervalSince(started) < 5)
            #expect(request.error == .cancelled)
            #expect(request.isCancelled)
            let index = try #require(cancelledAt.withLock { $0 })
            let after = events.all[(index + 1)...].map(\.percent)
            #expect(after == [-1], "after returning false: \(after)")
        }

        @Test func byCancellingTheTask() async throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/stall?stall_ms=5000"))
            request.callbackQueue = .global()
            let task = Task { try await request.response() }
            try await Task.sleep(for: .milliseconds(300))
            let cancelled = Date()
            task.cancel()
            do {
                _ = try await task.value
                Issue.record("the request was not cancelled")
            } catch TernError.cancelled {
                // expected
            }
            #expect(Date().timeIntervalSince(cancelled) < 1)
            #expect(request.isCancelled)
        }

        @Test func aTaskCancelledBeforehandCancelsAtOnce() async throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/slowheaders?delay_ms=3000"))
            request.callbackQueue = .global()
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await request.response()
            }
            let started = Date()
            await #expect(throws: TernError.cancelled) { try await task.value }
            #expect(Date().timeIntervalSince(started) < 1)
        }

        @Test func cancelFromAnotherThread() async throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/slowheaders?delay_ms=3000"))
            request.callbackQueue = .global()
            request.execute()
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) { request.cancel() }
            let started = Date()
            #expect(throws: TernError.cancelled) { try request.executeAndWait() }
            #expect(Date().timeIntervalSince(started) < 1)
            request.cancel()  // after completion: nothing happens
            #expect(request.error == .cancelled)
        }

        @Test func clearDelegatesAndCancelDropsEveryLaterCallback() async throws {
            let servers = try Servers.get()
            let queue = DispatchQueue(label: "tern.test.clear")
            let events = Recorder<Int>()
            let completions = Recorder<Int>()
            let chunks = Recorder<Int>()
            let firstEvent = DispatchSemaphore(value: 0)
            let request = Request(url: servers.fault("/ok?size=20000000&drip_ms=10&drip_bytes=16384"))
            request.callbackQueue = queue
            request.listener = { _, _, percent in
                events.append(percent)
                if events.count == 1 { firstEvent.signal() }
                return true
            }
            request.dataHandler = { data in
                chunks.append(data.count)
                return true
            }
            request.onCompletion { _ in completions.append(1) }
            request.execute()
            #expect(firstEvent.wait(timeout: .now() + 5) == .success)
            #expect(eventually { chunks.count > 0 })
            request.clearDelegatesAndCancel()
            let (eventCount, chunkCount) = (events.count, chunks.count)
            #expect(eventually { request.isFinished })
            queue.sync {}  // let anything already queued run (it must not reach the closures)
            usleep(200_000)
            #expect(events.count == eventCount)
            #expect(chunks.count == chunkCount)
            #expect(completions.count == 0)
            #expect(request.listener == nil)
            #expect(request.isCancelled)
        }

        final class Owner: Sendable {
            let events = Recorder<Int>()
        }

        @Test func releasedOwnerIsNeverCalledAndCancels() async throws {
            let servers = try Servers.get()
            let queue = DispatchQueue(label: "tern.test.owner")
            let first = DispatchSemaphore(value: 0)
            let request = Request(url: servers.fault("/ok?size=20000000&drip_ms=10&drip_bytes=16384"))
            request.callbackQueue = queue
            weak var weakOwner: Owner?
            do {
                let owner = Owner()
                weakOwner = owner
                request.setListener(owner: owner) { owner, _, _, percent in
                    owner.events.append(percent)
                    if owner.events.count == 1 { first.signal() }
                    return true
                }
                request.execute()
                #expect(first.wait(timeout: .now() + 5) == .success)
            }
            #expect(eventually { weakOwner == nil }, "the request must not keep its owner alive")
            #expect(eventually { request.isFinished })
            #expect(request.error == .cancelled)
        }
    }
}
