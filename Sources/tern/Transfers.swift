// How many transfers run at once: the one place that decides it. Without -Z the limit is 1
// (one after another, in command-line order); with -Z it is --parallel-max. Written with
// structured concurrency, a task group that keeps at most `limit` children running and starts
// the next URL as one ends, so that a switch to the library's RequestQueue stays a change of
// this file alone.

enum Transfers {
    /// Runs `job(0)` ... `job(count - 1)`, starting them in index order with at most `limit`
    /// running at once, and hands each result to `ended` as it comes (in the order the jobs
    /// end). When `ended` returns `false`, no further job starts and the running ones are
    /// cancelled (their tasks are; a transfer turns that into cancelling its request); their
    /// results still come to `ended`. Returns when every started job has ended.
    static func run(
        _ count: Int, atMost limit: Int,
        _ job: @escaping @Sendable (Int) async -> Int32,
        ended: (Int, Int32) -> Bool
    ) async {
        let limit = max(1, limit)
        await withTaskGroup(of: (Int, Int32).self) { group in
            var next = 0
            while next < min(limit, count) {
                let index = next
                group.addTask { (index, await job(index)) }
                next += 1
            }
            var stopping = false
            while let (index, code) = await group.next() {
                if stopping { _ = ended(index, code); continue }
                if !ended(index, code) {
                    stopping = true
                    group.cancelAll()
                } else if next < count {
                    let index = next
                    group.addTask { (index, await job(index)) }
                    next += 1
                }
            }
        }
    }
}
