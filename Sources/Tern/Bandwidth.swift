// Bandwidth budgets: a rate per direction (Bandwidth), and BandwidthBudget, the Swift face of
// tern_bandwidth_t, a budget shared by a group of requests. The engine's own budget lives on
// Engine (Configuration.maxReceiveSpeed, setMaxSpeed(receive:send:)); the C calls are in
// CTern+Bridging.swift.

import Synchronization

/// A rate in bytes per second for each direction: a budget (0 meaning none), or the bandwidth
/// actually used.
public struct Bandwidth: Sendable, Hashable, CustomStringConvertible {
    /// Bytes per second received: read from the sockets (over TLS, the encrypted bytes).
    public var receive: UInt64
    /// Bytes per second sent: request heads and bodies written to the sockets.
    public var send: UInt64

    /// Creates a rate; a direction left out is 0.
    public init(receive: UInt64 = 0, send: UInt64 = 0) {
        self.receive = receive
        self.send = send
    }

    public var description: String { "receive \(receive) B/s, send \(send) B/s" }
}

/// A bandwidth budget shared by a group of requests, such as the downloads of one screen or
/// of one queue.
///
/// Set it as the ``Request/bandwidthBudget`` of each request of the group: together they
/// receive and send at most about the budget's rates, sharing it about equally, besides
/// obeying their engine's budget (``Engine/Configuration/maxReceiveSpeed``) and their own
/// caps (``Request/maxReceiveSpeed``, ``Request/maxSendSpeed``). Requests outside the group
/// are not held back by it. One budget may serve requests of several engines.
///
/// ```swift
/// let budget = BandwidthBudget(receive: 2 << 20)  // 2 MiB/s down for the group
/// for request in downloads {
///     request.bandwidthBudget = budget
///     request.execute()
/// }
/// budget.setMaxSpeed(receive: 4 << 20, send: 0)  // changed while they run
/// print(budget.bandwidthUsed.receive)            // about 4 MiB/s a second later
/// ```
///
/// Rates count the bytes on the sockets (over TLS, the encrypted bytes), and a request over
/// budget waits before reading or writing more, so senders are slowed by TCP flow control and
/// nothing piles up in memory. The budget stays alive as long as a request may use it, even
/// after the caller lets go of it.
public final class BandwidthBudget: Sendable {
    /// The tern_bandwidth_t: one reference, dropped in deinit. Only passed to C calls
    /// documented as callable from any thread.
    nonisolated(unsafe) let handle: OpaquePointer
    /// The rates now. The lock also orders concurrent changes, so the C budget ends with the
    /// last one.
    private let speed: Mutex<Bandwidth>

    /// Creates a budget; 0 (the default for each direction) sets no budget for that direction,
    /// whose bandwidth is still measured by ``bandwidthUsed``.
    ///
    /// - Parameters:
    ///   - receive: Bytes per second the group's requests may receive together.
    ///   - send: Bytes per second the group's requests may send together.
    public init(receive: UInt64 = 0, send: UInt64 = 0) {
        guard let handle = CBandwidth.make(receive: receive, send: send) else {
            fatalError("Tern: out of memory for a bandwidth budget")
        }
        self.handle = handle
        speed = Mutex(Bandwidth(receive: receive, send: send))
    }

    deinit {
        // Requests set to the budget hold references of their own until they are freed.
        CBandwidth.free(handle)
    }

    /// The budget's rates now, in bytes per second for each direction (0: none).
    public var maxSpeed: Bandwidth { speed.withLock { $0 } }

    /// Changes the budget's rates; 0 lifts a direction's budget.
    ///
    /// Applies to the group's requests already transferring too, within about a tenth of a
    /// second. Callable from any thread.
    ///
    /// - Parameters:
    ///   - receive: Bytes per second the group's requests may receive together.
    ///   - send: Bytes per second the group's requests may send together.
    public func setMaxSpeed(receive: UInt64, send: UInt64) {
        speed.withLock { current in
            CBandwidth.setMaxSpeed(handle, receive: receive, send: send)
            current = Bandwidth(receive: receive, send: send)
        }
    }

    /// The bandwidth the group's requests actually used, in average bytes per second over
    /// about the last second (ASIHTTPRequest's `averageBandwidthUsedPerSecond`), whether a
    /// budget is set or not.
    public var bandwidthUsed: Bandwidth { CBandwidth.used(handle) }
}
