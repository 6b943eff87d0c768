// Listener delivery: on the chosen queue, in order, percent monotonic per state, the last
// download event 100 exactly once, -1 once on failure; upload events; concatData.

import Dispatch
import Foundation
import Testing
@testable import Tern

extension TernTests {
    @Suite struct Listener {
        @Test func runsOnTheChosenSerialQueueInOrder() async throws {
            let servers = try Servers.get()
            let queue = DispatchQueue(label: "tern.test.listener")
            let probe = QueueProbe(queue)
            let events = Recorder<Event>()
            let completionOnQueue = Recorder<Bool>()
            let file = temporaryPath("100m")
            defer { try? FileManager.default.removeItem(atPath: file) }

            let request = Request(url: servers.nginx("/100m.bin"))
            request.downloadFile = file
            request.callbackQueue = queue
            request.listener = { _, state, percent in
                events.append(Event(state: state, percent: percent, onQueue: probe.isCurrent))
                return true
            }
            request.onCompletion { _ in completionOnQueue.append(probe.isCurrent) }
            await runToCompletion(request)

            #expect(request.error == nil)
            let all = events.all
            #expect(all.allSatisfy { $0.onQueue })
            let percents = all.filter { $0.state == .download }.map(\.percent)
            #expect(percents == percents.sorted(), "download percents go back: \(percents)")
            #expect(percents.last == 100)
            #expect(percents.filter { $0 == 100 }.count == 1)
            #expect(percents.count > 10, "expected intermediate events, got \(percents)")
            #expect(completionOnQueue.all == [true])
            #expect(sha256(file: file) == servers.sha("SHA_100M"))
        }

        @Test func defaultsToAGlobalQueue() async throws {
            let servers = try Servers.get()
            let events = Recorder<Event>()
            let request = Request(url: servers.nginx("/64k.txt"))
            #expect(request.callbackQueue.label == DispatchQueue.global().label)
            request.listener = { _, state, percent in
                events.append(Event(state: state, percent: percent, onQueue: !Thread.isMainThread))
                return true
            }
            await runToCompletion(request)
            #expect(!events.all.isEmpty)
            #expect(events.all.allSatisfy { $0.onQueue })
            #expect(events.all.last == Event(state: .download, percent: 100, onQueue: true))
        }

        /// A command-line program that blocks its main queue until a request is done: with the
        /// default queue, its listener and completion run and the wait ends.
        @MainActor @Test func aBlockedMainThreadDoesNotHangTheDefaults() throws {
            let servers = try Servers.get()
            #expect(QueueProbe(.main).isCurrent, "a @MainActor test runs on the main queue")
            let done = DispatchSemaphore(value: 0)
            let events = Recorder<Int>()
            let request = Request(url: servers.nginx("/64k.txt"))
            request.listener = { _, _, percent in
                events.append(percent)
                return true
            }
            request.onCompletion { _ in done.signal() }
            request.execute()
            #expect(done.wait(timeout: .now() + 10) == .success, "the completion never ran")
            #expect(events.all.last == 100)
            #expect(request.statusCode == 200)
        }

        @Test func staysInOrderOnAConcurrentQueue() async throws {
            let servers = try Servers.get()
            let events = Recorder<Event>()
            let file = temporaryPath("100m")
            defer { try? FileManager.default.removeItem(atPath: file) }
            let request = Request(url: servers.nginx("/100m.bin"))
            request.downloadFile = file
            request.callbackQueue = .global()
            request.listener = { _, state, percent in
                events.append(Event(state: state, percent: percent, onQueue: true))
                usleep(100)  // widen any window for overtaking
                return true
            }
            await runToCompletion(request)
            let percents = events.all.map(\.percent)
            #expect(percents == percents.sorted())
            #expect(percents.last == 100)
            #expect(percents.filter { $0 == 100 }.count == 1)
        }

        @Test func reportsUploadThenDownload() async throws {
            let servers = try Servers.get()
            let events = Recorder<Event>()
            let body = pattern(8 << 20)
            let request = Request(url: servers.nginx("/upload/listener-\(UUID()).bin"), method: .put)
            request.body = body
            request.callbackQueue = DispatchQueue(label: "tern.test.upload")
            request.listener = { _, state, percent in
                events.append(Event(state: state, percent: percent, onQueue: true))
                return true
            }
            await runToCompletion(request)
            #expect(request.error == nil)
            #expect([201, 204].contains(request.statusCode))
            let all = events.all
            let uploads = all.filter { $0.state == .upload }.map(\.percent)
            #expect(uploads == uploads.sorted())
            #expect(uploads.last == 100)
            #expect(uploads.filter { $0 == 100 }.count == 1)
            #expect(uploads.count > 2, "expected several upload events, got \(uploads)")
            #expect(all.last == Event(state: .download, percent: 100, onQueue: true))
            let firstDownload = all.firstIndex { $0.state == .download } ?? 0
            #expect(all[firstDownload...].allSatisfy { $0.state == .download })
        }

        @Test func failureEndsWithOneMinusOne() async throws {
            let events = Recorder<Event>()
            let completions = Recorder<Int>()
            let request = Request(url: URL(string: "http://127.0.0.1:1/")!)
            request.callbackQueue = DispatchQueue(label: "tern.test.failure")
            request.listener = { _, state, percent in
                events.append(Event(state: state, percent: percent, onQueue: true))
                return true
            }
            request.onCompletion { _ in completions.append(1) }
            await runToCompletion(request)
            #expect(events.all == [Event(state: .upload, percent: -1, onQueue: true)])
            #expect(completions.count == 1)
            #expect(request.progress.percent == -1)
            #expect(request.error == .connectionRefused)
        }

        @Test func failureAfterTheHeadIsADownloadMinusOne() async throws {
            let servers = try Servers.get()
            let events = Recorder<Event>()
            let request = Request(url: servers.fault("/truncate?len=100000&send=50000"))
            request.callbackQueue = DispatchQueue(label: "tern.test.truncate")
            request.listener = { _, state, percent in
                events.append(Event(state: state, percent: percent, onQueue: true))
                return true
            }
            await runToCompletion(request)
            #expect(request.error == .partialBody)
            let all = events.all
            #expect(all.last == Event(state: .download, percent: -1, onQueue: true))
            #expect(all.filter { $0.percent == -1 }.count == 1)
            #expect(!all.contains { $0.percent == 100 })
        }

        @Test func concatDataCoalescesToTheBufferSize() async throws {
            let servers = try Servers.get()
            let chunks = Recorder<Data>()
            let request = Request(url: servers.fault("/ok?size=300000&chunked=1&chunk=1000"))
            request.callbackQueue = .global()
            request.bufferSize = 65536
            request.concatData = true
            request.dataHandler = { data in
                chunks.append(data)
                return true
            }
            let response = try await request.response()
            #expect(response.data.isEmpty)
            let sizes = chunks.all.map(\.count)
            #expect(sizes.dropLast().allSatisfy { $0 == 65536 }, "\(sizes)")
            #expect(sizes.reduce(0, +) == 300000)
            #expect(Data(chunks.all.joined()) == pattern(300000))
        }

        @Test func withoutConcatDataPiecesArriveAsRead() async throws {
            let servers = try Servers.get()
            let chunks = Recorder<Int>()
            let request = Request(url: servers.fault("/ok?size=300000&drip_ms=5&drip_bytes=5000"))
            request.callbackQueue = .global()
            request.dataHandler = { data in
                chunks.append(data.count)
                return true
            }
            _ = try await request.response()
            #expect(chunks.all.reduce(0, +) == 300000)
            #expect(chunks.all.contains { $0 < 65536 })
            #expect(chunks.count > 5)
        }

        @Test func concatDataThinsOutDownloadEvents() async throws {
            let servers = try Servers.get()
            func events(concat: Bool) async -> [Int] {
                let recorder = Recorder<Int>()
                let request = Request(url: servers.fault("/ok?size=2000000&drip_ms=2&drip_bytes=20000"))
                request.callbackQueue = .global()
                request.bufferSize = 1 << 20
                request.concatData = concat
                request.listener = { _, state, percent in
                    if state == .download { recorder.append(percent) }
                    return true
                }
                await runToCompletion(request)
                return recorder.all
            }
            let plain = await events(concat: false)
            let concatenated = await events(concat: true)
            #expect(plain.count > 20)
            #expect(concatenated.count <= 4, "\(concatenated)")
            #expect(concatenated.last == 100)
        }
    }
}
