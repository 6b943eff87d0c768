// Bandwidth budgets: a rate per direction (Bandwidth). The engine's own budget lives on
// Engine (Configuration.maxReceiveSpeed, setMaxSpeed(receive:send:)); the C calls are in
// CTern+Bridging.swift.

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
