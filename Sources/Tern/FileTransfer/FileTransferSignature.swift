// FileTransferSignature: Mesibo's file transfer signatures in Swift, over the C engine's
// tern_signature_* (one implementation for the client, the C ABI and servers in Swift).

internal import CTern
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The signatures of Mesibo's signed file transfer, for apps that sign transfers and for
/// servers that host the files and check them.
///
/// An upload sends `sig = sha256(uid + "-" + ts + "-" + accessToken)` (lower-case hex) as a form
/// field; a download appends `?v=1&uid=<uid>&ts=<ts>&sig=<sig>` to the file's URL, with
/// `sig = sha256(url + "-" + uid + "-" + ts + "-" + accessToken)` where `url` is the URL
/// without its query.
///
/// ```swift
/// let sig = FileTransferSignature.upload(uid: "123", timestamp: 1770223138, accessToken: token)
/// // on the server:
/// let check = FileTransferSignature.verify(
///     uid: uid, timestamp: ts, accessToken: tokens[uid], signature: sig)
/// guard check == .valid else { /* answer 403 */ }
/// ```
public enum FileTransferSignature {
    /// The usual window of ``verify(url:uid:timestamp:accessToken:signature:now:window:)``:
    /// 300 seconds either side of the server's clock.
    public static let defaultWindow: Int64 = Int64(TERN_SIGNATURE_WINDOW)

    /// What ``verify(url:uid:timestamp:accessToken:signature:now:window:)`` found.
    public enum Verification: Sendable, Hashable {
        /// The signature matches and its timestamp lies within the window.
        case valid
        /// No signature, or no uid or access token to check it with.
        case missing
        /// The signature is not that of these values (tampered, or signed with another token).
        case mismatch
        /// The timestamp lies outside the window: a replayed or stale request.
        case expired
    }

    /// The upload signature, `sha256(uid-ts-accessToken)` in lower-case hex.
    ///
    /// - Returns: 64 hex digits, or `nil` when `uid` or `accessToken` is empty.
    public static func upload(uid: String, timestamp: Int64, accessToken: String) -> String? {
        sign { tern_signature_upload(uid, timestamp, accessToken, $0) }
    }

    /// The download signature, `sha256(url-uid-ts-accessToken)` in lower-case hex, where `url`
    /// is `url` without its query and fragment (they may be given; they are left out).
    ///
    /// - Returns: 64 hex digits, or `nil` when an argument is empty.
    public static func download(
        url: String, uid: String, timestamp: Int64, accessToken: String
    ) -> String? {
        sign { tern_signature_download(url, uid, timestamp, accessToken, $0) }
    }

    /// The query a signed download appends to the file's URL: `v=1&uid=…&ts=…&sig=…`.
    ///
    /// - Returns: The query without `?`, or `nil` when an argument is empty.
    public static func downloadQuery(
        url: String, uid: String, timestamp: Int64, accessToken: String
    ) -> String? {
        guard let sig = download(url: url, uid: uid, timestamp: timestamp, accessToken: accessToken)
        else { return nil }
        return "v=1&uid=\(urlEncode(uid))&ts=\(timestamp)&sig=\(sig)"
    }

    /// Checks a signature as the file server does, comparing in constant time.
    ///
    /// - Parameters:
    ///   - url: The file's URL for a download; `nil` for an upload.
    ///   - uid: The user's id as sent.
    ///   - timestamp: The `ts` as sent (epoch seconds).
    ///   - accessToken: The user's access token, looked up by `uid`; `nil` when unknown.
    ///   - signature: The `sig` as sent; `nil` when absent.
    ///   - now: The server's clock in epoch seconds (the current time when `nil`).
    ///   - window: How far `timestamp` may lie from `now`, in seconds.
    /// - Returns: ``Verification/valid``, or why the request must be refused.
    public static func verify(
        url: String? = nil, uid: String, timestamp: Int64, accessToken: String?,
        signature: String?, now: Int64? = nil, window: Int64 = defaultWindow
    ) -> Verification {
        let clock = now ?? Int64(Date().timeIntervalSince1970.rounded(.down))
        if let url, url.isEmpty || url.hasPrefix("?") || url.hasPrefix("#") { return .mismatch }
        let r: Int32 =
            if let url {
                tern_signature_verify(
                    url, uid, timestamp, accessToken, signature, clock, max(window, 0))
            } else {
                tern_signature_verify(
                    nil, uid, timestamp, accessToken, signature, clock, max(window, 0))
            }
        switch r {
        case Int32(TERN_SIGNATURE_OK.rawValue): return .valid
        case Int32(TERN_SIGNATURE_MISSING.rawValue): return .missing
        case Int32(TERN_SIGNATURE_EXPIRED.rawValue): return .expired
        default: return .mismatch
        }
    }

    private static func sign(_ body: (UnsafeMutablePointer<CChar>) -> Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(TERN_SIGNATURE_LEN) + 1)
        let r = buffer.withUnsafeMutableBufferPointer { body($0.baseAddress!) }
        guard r == 0 else { return nil }
        let digits = buffer.prefix(Int(TERN_SIGNATURE_LEN)).map { UInt8(bitPattern: $0) }
        return String(decoding: digits, as: UTF8.self)
    }
}
