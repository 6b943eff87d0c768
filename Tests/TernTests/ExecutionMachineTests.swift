// The execution's rules without a network: the state machine is fed events and its answers are
// checked (as async-http-client tests its connection state machines).

import Testing
@testable import Tern

extension TernTests {
    @Suite struct ExecutionMachineRules {
        typealias Machine = ExecutionMachine
        typealias End = ExecutionMachine.AttemptEnd

        func machine(_ configure: (inout Machine.Policy) -> Void = { _ in }) -> Machine {
            var policy = Machine.Policy()
            configure(&policy)
            return Machine(policy: policy)
        }

        @Test func aResponseFinishesAtOnce() {
            var m = machine { $0.maxRetries = 3 }
            #expect(m.start(now: 0) == .submit(attempt: 1, timeLeft: nil))
            #expect(m.attemptEnded(attempt: 1, End(status: 200), now: 1) == .finish(.lastAttempt))
            #expect(m.isFinished)
            #expect(m.attempts == 1)
        }

        @Test func retryableStatusesAreRetriedThenTheLastResponseIsTheResult() {
            var m = machine {
                $0.maxRetries = 2
                $0.retryDelay = 1
            }
            _ = m.start(now: 0)
            #expect(m.attemptEnded(attempt: 1, End(status: 503), now: 0) == .retry(after: 1, attempt: 2))
            #expect(m.retryDue(now: 1) == .submit(attempt: 2, timeLeft: nil))
            #expect(m.attemptEnded(attempt: 2, End(status: 502), now: 1) == .retry(after: 2, attempt: 3))
            #expect(m.retryDue(now: 3) == .submit(attempt: 3, timeLeft: nil))
            #expect(m.attemptEnded(attempt: 3, End(status: 503), now: 3) == .finish(.lastAttempt))
            #expect(m.attempts == 3)
        }

        @Test func statusesOtherThanTheTransientOnesAreNotRetried() {
            for status in [200, 204, 301, 400, 401, 404, 501] {
                var m = machine { $0.maxRetries = 5 }
                _ = m.start(now: 0)
                #expect(m.attemptEnded(attempt: 1, End(status: status), now: 0) == .finish(.lastAttempt))
            }
        }

        @Test func nonIdempotentMethodsRetryOnlyWhatWasNotProcessed() {
            func retried(_ end: End) -> Bool {
                var m = machine {
                    $0.maxRetries = 1
                    $0.idempotent = false
                }
                _ = m.start(now: 0)
                if case .retry = m.attemptEnded(attempt: 1, end, now: 0) { return true }
                return false
            }
            #expect(retried(End(error: .connectionRefused)))
            #expect(retried(End(error: .connectTimedOut)))
            #expect(retried(End(status: 429)))
            #expect(retried(End(status: 408)))
            #expect(!retried(End(status: 503)))
            #expect(!retried(End(error: .connectionReset)))
            #expect(!retried(End(error: .headersTimedOut)))
        }

        @Test func retryAfterIsHonouredUpToTheCap() {
            var m = machine {
                $0.maxRetries = 3
                $0.retryDelay = 0.5
                $0.maxRetryDelay = 10
            }
            _ = m.start(now: 0)
            #expect(m.attemptEnded(attempt: 1, End(status: 503, retryAfter: 3), now: 0) == .retry(after: 3, attempt: 2))
            _ = m.retryDue(now: 3)
            #expect(m.attemptEnded(attempt: 2, End(status: 429, retryAfter: 3600), now: 3) == .retry(after: 10, attempt: 3))
        }

        @Test func delaysDoubleUpToTheCap() {
            var m = machine {
                $0.maxRetries = 10
                $0.retryDelay = 1
                $0.maxRetryDelay = 5
            }
            var now = 0.0
            _ = m.start(now: now)
            var delays: [Double] = []
            for attempt in 1...5 {
                guard case .retry(let delay, _) = m.attemptEnded(attempt: attempt, End(error: .connectionRefused), now: now)
                else { Issue.record("no retry"); return }
                delays.append(delay)
                now += delay
                _ = m.retryDue(now: now)
            }
            #expect(delays == [1, 2, 4, 5, 5])
        }

        @Test func theTotalLimitSpansAttemptsAndDelays() {
            var m = machine {
                $0.maxRetries = 10
                $0.retryDelay = 1
                $0.totalTimeout = 2.5
            }
            #expect(m.start(now: 100) == .submit(attempt: 1, timeLeft: 2.5))
            #expect(m.attemptEnded(attempt: 1, End(error: .connectionRefused), now: 100.25) == .retry(after: 1, attempt: 2))
            #expect(m.retryDue(now: 101.25) == .submit(attempt: 2, timeLeft: 1.25))
            // The next wait (2 s) would end past the limit: the failure at hand is the result.
            #expect(m.attemptEnded(attempt: 2, End(error: .connectionRefused), now: 101.5) == .finish(.lastAttempt))
        }

        @Test func aRetryThatComesTooLateTimesOut() {
            var m = machine {
                $0.maxRetries = 1
                $0.totalTimeout = 1
            }
            _ = m.start(now: 0)
            #expect(m.attemptEnded(attempt: 1, End(error: .connectionRefused), now: 0.5) == .retry(after: 0, attempt: 2))
            #expect(m.retryDue(now: 1.5) == .finish(.totalTimedOut))
        }

        @Test func bodiesThatCannotBeRepeatedAreNotRetried() {
            var m = machine { $0.maxRetries = 3 }
            _ = m.start(now: 0)
            #expect(m.attemptEnded(attempt: 1, End(error: .partialBody, deliveredBody: true), now: 0) == .finish(.lastAttempt))
            var n = machine { $0.maxRetries = 3 }
            _ = n.start(now: 0)
            #expect(n.attemptEnded(attempt: 1, End(error: .connectionRefused, canReplayBody: false), now: 0) == .finish(.lastAttempt))
        }

        @Test func cancelDuringAnAttemptCancelsItOnce() {
            var m = machine { $0.maxRetries = 3 }
            _ = m.start(now: 0)
            #expect(m.cancel() == .cancelAttempt)
            #expect(m.cancel() == .nothing)
            #expect(m.attemptEnded(attempt: 1, End(error: .cancelled), now: 0) == .finish(.lastAttempt))
            #expect(m.cancel() == .nothing)
        }

        @Test func cancelWhileWaitingToRetryFinishesAtOnce() {
            var m = machine {
                $0.maxRetries = 3
                $0.retryDelay = 5
            }
            _ = m.start(now: 0)
            _ = m.attemptEnded(attempt: 1, End(error: .connectionRefused), now: 0)
            #expect(m.cancel() == .finish(.cancelled))
            #expect(m.retryDue(now: 5) == .nothing, "the timer that fires later does nothing")
        }

        @Test func cancelBeforeStartFinishes() {
            var m = machine()
            #expect(m.cancel() == .finish(.cancelled))
            #expect(m.start(now: 0) == .nothing)
        }

        @Test func eventsOfAnOldAttemptAreIgnored() {
            var m = machine { $0.maxRetries = 1 }
            _ = m.start(now: 0)
            _ = m.attemptEnded(attempt: 1, End(error: .connectionRefused), now: 0)
            _ = m.retryDue(now: 0)
            #expect(m.attemptEnded(attempt: 1, End(status: 200), now: 0) == .nothing)
            #expect(m.progress(attempt: 1, upload: false, percent: 50, bytes: 10) == nil)
        }

        @Test func percentsRiseAndTheDownloads100IsKeptForTheEnd() {
            var m = machine()
            _ = m.start(now: 0)
            #expect(m.progress(attempt: 1, upload: true, percent: 0, bytes: 0) == 0)
            #expect(m.progress(attempt: 1, upload: true, percent: 100, bytes: 10) == 100)
            #expect(m.progress(attempt: 1, upload: false, percent: 0, bytes: 0) == 0)
            #expect(m.progress(attempt: 1, upload: false, percent: 40, bytes: 4) == 40)
            #expect(m.progress(attempt: 1, upload: false, percent: 30, bytes: 5) == nil)
            #expect(m.progress(attempt: 1, upload: false, percent: -1, bytes: 5) == nil)
            #expect(m.progress(attempt: 1, upload: false, percent: 100, bytes: 10) == 99)
            #expect(m.progress(attempt: 1, upload: false, percent: 100, bytes: 10) == nil)
            _ = m.attemptEnded(attempt: 1, End(status: 200), now: 0)
            #expect(m.finalEvent(success: true)! == (false, 100))
        }

        @Test func aRetryNeverMakesPercentsGoBack() {
            var m = machine { $0.maxRetries = 1 }
            _ = m.start(now: 0)
            #expect(m.progress(attempt: 1, upload: false, percent: 60, bytes: 6) == 60)
            _ = m.attemptEnded(attempt: 1, End(error: .connectionReset), now: 0)
            _ = m.retryDue(now: 0)
            #expect(m.progress(attempt: 2, upload: false, percent: 10, bytes: 1) == nil)
            #expect(m.progress(attempt: 2, upload: false, percent: 70, bytes: 7) == 70)
        }

        @Test func coalescingReportsOncePerBufferOfBytes() {
            var m = machine { $0.coalesceBytes = 1000 }
            _ = m.start(now: 0)
            #expect(m.progress(attempt: 1, upload: false, percent: 1, bytes: 10) == 1)
            #expect(m.progress(attempt: 1, upload: false, percent: 2, bytes: 500) == nil)
            #expect(m.progress(attempt: 1, upload: false, percent: 3, bytes: 1010) == 3)
        }

        @Test func aFailureEndsWithOneMinusOneInItsDirection() {
            var up = machine()
            _ = up.start(now: 0)
            _ = up.attemptEnded(attempt: 1, End(error: .connectionRefused), now: 0)
            #expect(up.finalEvent(success: false)! == (true, -1))

            var down = machine()
            _ = down.start(now: 0)
            down.headArrived(attempt: 1)
            _ = down.attemptEnded(attempt: 1, End(error: .partialBody), now: 0)
            #expect(down.finalEvent(success: false)! == (false, -1))
        }

        @Test func progressStopsAfterACancel() {
            var m = machine()
            _ = m.start(now: 0)
            _ = m.cancel()
            #expect(m.progress(attempt: 1, upload: false, percent: 50, bytes: 5) == nil)
        }
    }
}
