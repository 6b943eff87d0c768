// EngineExecutor: Swift tasks run on the engine's loop thread. Jobs wait in a queue; the first
// job of an empty queue asks the engine (tern_engine_call) to drain it, which happens right
// after the current engine callback when enqueued from the loop thread itself (a request's
// completion resuming its task), else after one wake-up.

internal import CTern
import Dispatch

/// Runs tasks on an ``Engine``'s I/O thread; see ``Engine/executor``.
public final class EngineExecutor: TaskExecutor, @unchecked Sendable {
    // `jobs` is guarded by `lock`; `core` is immutable.
    private let core: EngineCore
    private let lock = StateLock(())
    @exclusivity(unchecked) private var jobs: [UnownedJob] = []  // guarded by `lock`
    /// The jobs the loop thread's drain is running. The two arrays trade places under the lock,
    /// so neither buffer is reallocated: a copy handed out of the lock made the
    /// `removeAll(keepingCapacity:)` after it allocate a new one at every drain. Only the
    /// loop thread's drain touches it.
    @exclusivity(unchecked) private var running: [UnownedJob] = []

    init(core: EngineCore) {
        self.core = core
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let first: Bool = lock.withLock { _ in
            jobs.append(unowned)
            return jobs.count == 1
        }
        guard first else { return }
        // The retain keeps the executor (and the engine under it) until the drain has run.
        let context = Unmanaged.passRetained(self).toOpaque()
        if tern_engine_call(core.handle, drainCallback, context) != 0 {
            // Out of memory: run the jobs elsewhere rather than never.
            Unmanaged<EngineExecutor>.fromOpaque(context).release()
            DispatchQueue.global().async { self.drainElsewhere() }
        }
    }

    /// Never re-entered: it runs as a call the engine queued (tern_engine_call), and the engine
    /// runs its queued calls one after another, so a drain scheduled by a job of this one runs
    /// after it returns. (Re-entered, the swap below would hand the outer drain's jobs back to
    /// the queue.)
    fileprivate func drain() {
        core.noteLoopThread()
        lock.withLock { _ in swap(&jobs, &running) }
        let me = asUnownedTaskExecutor()
        for job in running { job.runSynchronously(on: me) }
        // Emptied one by one: `removeAll(keepingCapacity:)` went through the generic
        // replaceSubrange, some 60 instructions for the usual one job.
        while running.popLast() != nil {}
    }

    /// The drain when the loop could not take one (out of memory): off the loop thread, with
    /// a batch of its own, `running` left to the loop's drains.
    private func drainElsewhere() {
        let batch: [UnownedJob] = lock.withLock { _ -> [UnownedJob] in
            defer { jobs = [] }
            return jobs
        }
        let me = asUnownedTaskExecutor()
        for job in batch { job.runSynchronously(on: me) }
    }
}

private let drainCallback: @convention(c) (UnsafeMutableRawPointer?) -> Void = { context in
    guard let context else { return }
    Unmanaged<EngineExecutor>.fromOpaque(context).takeRetainedValue().drain()
}
