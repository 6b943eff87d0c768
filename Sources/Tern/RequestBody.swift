// RequestBody: what a request sends, from memory, a file, segments (multipart from disk), or a
// stream of unknown length; a struct over an internal enum with static factories, so new
// kinds can be added without breaking callers. BodyStream bridges Swift closures to the
// engine's body callback, which runs on the engine's thread; bodies from an AsyncSequence
// (RequestBody+AsyncSequence.swift) are a BodyStream that can answer "not yet". (InputStream
// bodies live in the TernFoundation module, so that Tern itself needs only
// FoundationEssentials.)

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The body of a request: bytes in memory, a file (or part of one), a URL-encoded form, JSON,
/// a multipart form streamed from disk, or a stream of unknown length.
///
/// Set it on ``Request/requestBody``; any method may carry one (POST, PUT, PATCH, DELETE or a
/// custom one):
///
/// ```swift
/// request.requestBody = .form(["user": "ada"])
/// request.requestBody = try .json(Profile(name: "Ada"))
/// request.requestBody = .file("/tmp/video.mp4", contentType: "video/mp4")
/// request.requestBody = .multipart(form)
/// request.requestBody = .stream(chunks)  // an AsyncSequence of byte chunks, as they come
/// request.requestBody = .stream { buffer in nextChunk(into: buffer) }  // 0 at the end
/// ```
///
/// To send a Foundation `InputStream`, import the `TernFoundation` module, which adds
/// `RequestBody.stream(_:length:contentType:)` and
/// `MultipartForm.Part.stream(_:name:fileName:contentType:)` for it.
///
/// Bodies whose size is known (memory, files, multipart forms of those) are sent with a
/// `Content-Length` computed up front; files are read through the connection buffer while
/// sending and never loaded whole. Streams of unknown length are sent chunked, which needs
/// HTTP/1.1. Bytes that arrive over time (a pipe, a socket, a recording) come from an
/// `AsyncSequence` (``stream(_:length:contentType:)``): waiting for them holds up nothing.
///
/// The body's ``contentType`` is sent as `Content-Type` unless the request's header fields
/// name one.
public struct RequestBody: Sendable {
    enum Storage: Sendable {
        case data(Data)
        case file(path: String, offset: UInt64, end: UInt64)
        /// Memory and file pieces sent in order (the engine's body segments).
        case segments([BodySegment])
        /// Bytes pulled from a stream on the engine's thread; `nil` length: chunked.
        case stream(length: UInt64?, BodyStream)
    }

    let storage: Storage
    /// The form behind a multipart body, so that post values can join it as leading fields.
    let form: MultipartForm?

    /// The media type this body is, sent as `Content-Type` unless the request's header fields
    /// set one; `nil` sends none.
    public let contentType: String?

    init(_ storage: Storage, contentType: String?, form: MultipartForm? = nil) {
        self.storage = storage
        self.contentType = contentType
        self.form = form
    }

    /// The body's size in bytes when it is known before sending (memory only; files are
    /// measured when the request starts), else `nil`.
    public var count: UInt64? {
        switch storage {
        case .data(let data): return UInt64(data.count)
        case .stream(let length, _): return length
        case .file, .segments: return nil
        }
    }

    /// Bytes from memory, copied when the request starts.
    ///
    /// - Parameters:
    ///   - data: The body.
    ///   - contentType: Its media type, if any.
    public static func data(_ data: Data, contentType: String? = nil) -> RequestBody {
        RequestBody(.data(data), contentType: contentType)
    }

    /// Text, sent as UTF-8.
    ///
    /// - Parameters:
    ///   - string: The body.
    ///   - contentType: Its media type (default `text/plain; charset=utf-8`).
    public static func string(
        _ string: String, contentType: String? = "text/plain; charset=utf-8"
    ) -> RequestBody {
        RequestBody(.data(Data(string.utf8)), contentType: contentType)
    }

    /// The bytes of a file, `offset..<end` (`end` `nil`: to the end of the file), streamed
    /// through the connection buffer while sending and never loaded whole.
    ///
    /// The file is opened when the request starts; a missing file fails the request with
    /// ``TernError/Code/fileReadFailed``.
    ///
    /// - Parameters:
    ///   - path: The file to send.
    ///   - offset: The first byte to send (default 0).
    ///   - end: The byte after the last one to send; `nil` sends to the end.
    ///   - contentType: Its media type, if any.
    public static func file(
        _ path: String, offset: UInt64 = 0, end: UInt64? = nil, contentType: String? = nil
    ) -> RequestBody {
        RequestBody(.file(path: path, offset: offset, end: end ?? 0), contentType: contentType)
    }

    /// A URL-encoded form (`application/x-www-form-urlencoded`).
    ///
    /// - Parameter form: The fields, in order; names may repeat.
    public static func form(_ form: URLEncodedForm) -> RequestBody {
        RequestBody(
            .data(form.encodedData), contentType: "application/x-www-form-urlencoded")
    }

    /// A value encoded as JSON (`application/json`).
    ///
    /// - Parameters:
    ///   - value: The value to encode.
    ///   - encoder: The encoder to use (default: a plain `JSONEncoder`).
    /// - Throws: The encoder's error when the value cannot be encoded.
    public static func json<Value: Encodable>(
        _ value: Value, encoder: JSONEncoder = JSONEncoder()
    ) throws -> RequestBody {
        RequestBody(.data(try encoder.encode(value)), contentType: "application/json")
    }

    /// A `multipart/form-data` form: its files are streamed from disk, never held in memory.
    ///
    /// When every part's size is known (fields, data, files), the `Content-Length` is
    /// computed up front from the files' sizes as the request starts; a form with a stream
    /// part is sent chunked.
    ///
    /// - Parameter form: The form.
    public static func multipart(_ form: MultipartForm) -> RequestBody {
        RequestBody(form.storage(), contentType: form.contentType, form: form)
    }

    /// Bytes produced by a closure, called on the engine's thread whenever the connection can
    /// take more.
    ///
    /// The closure fills the buffer it is given (up to its size) and returns how many bytes it
    /// wrote, or 0 at the end of the body; throwing aborts the request with
    /// ``TernError/Code/fileReadFailed``. It must return at once with what it has: it cannot
    /// wait for more data without stalling the engine (a closure over a file or memory is
    /// fine; one over a slow pipe or socket stalls every request of the engine while it
    /// waits). For bytes that arrive over time, give an `AsyncSequence` of chunks to
    /// ``stream(_:length:contentType:)`` instead.
    ///
    /// A stream can be read once: a request with a stream body is not retried once reading
    /// began, cannot follow a 307/308 redirect, and executing the request again fails with
    /// ``TernError/Code/fileReadFailed`` unless a new body is set.
    ///
    /// ```swift
    /// let log = try FileHandle(forReadingFrom: logURL)
    /// request.requestBody = .stream { buffer in
    ///     let chunk = try log.read(upToCount: buffer.count) ?? Data()
    ///     return chunk.copyBytes(to: buffer)  // 0 at the end of the file
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - length: The body's length when known; `nil` sends it chunked.
    ///   - contentType: Its media type, if any.
    ///   - read: Fills a buffer; returns the byte count, 0 at the end.
    public static func stream(
        length: UInt64? = nil, contentType: String? = nil,
        _ read: @escaping @Sendable (UnsafeMutableRawBufferPointer) throws -> Int
    ) -> RequestBody {
        RequestBody(.stream(length: length, ClosureBody(read)), contentType: contentType)
    }
}

/// One piece of a body made of segments.
enum BodySegment: Sendable {
    case data(Data)
    case file(path: String, offset: UInt64, end: UInt64)
}

/// Why a stream body stopped; its text ends up in the request's error message.
struct BodyStreamError: Error, CustomStringConvertible {
    var description: String
}

/// A body read piece by piece on the engine's thread. One attempt may read it: a retry or a
/// second execution would otherwise send what is left of it as if it were the whole.
///
/// Subclasses hold non-Sendable sources (InputStream); they are touched only on the engine's
/// loop thread, by the one attempt that claimed them, so `@unchecked Sendable` is safe.
class BodyStream: @unchecked Sendable {
    private let claim = Locked<UInt64?>(nil)

    /// What ``read(into:for:waker:)`` returns when no bytes are ready yet but the body has not
    /// ended: the engine waits until `tern_request_resume_send` on the waker (TERN_READ_WAIT).
    static let notReady = -1

    /// True once an attempt started reading: the body cannot be sent again.
    var hasStarted: Bool { claim.withLock { $0 != nil } }

    /// Reads the next bytes for the attempt `token`; 0 at the end, ``notReady`` when the
    /// stream will resume `waker` (the attempt's C request) once it has bytes.
    final func read(
        into buffer: UnsafeMutableRawBufferPointer, for token: UInt64, waker: CRequest?
    ) throws -> Int {
        let mine: Bool = claim.withLock { owner in
            if owner == nil { owner = token }
            return owner == token
        }
        guard mine else {
            throw BodyStreamError(description: "a stream body can be sent only once; set a new one")
        }
        return try readNext(into: buffer, for: token, waker: waker)
    }

    /// Fills `buffer` with the next bytes; 0 at the end, ``notReady`` to wait for a resume of
    /// `waker`. Loop thread only; `token` names the reading attempt, for streams nested in
    /// this one.
    func readNext(
        into buffer: UnsafeMutableRawBufferPointer, for token: UInt64, waker: CRequest?
    ) throws -> Int {
        0
    }

    /// The attempt `token` completed (any thread): a stream fed from elsewhere stops feeding.
    /// Called for every attempt, read or not.
    func attemptEnded(_ token: UInt64) {}
}

/// Calls a caller's closure.
final class ClosureBody: BodyStream, @unchecked Sendable {
    private let body: @Sendable (UnsafeMutableRawBufferPointer) throws -> Int

    init(_ body: @escaping @Sendable (UnsafeMutableRawBufferPointer) throws -> Int) {
        self.body = body
    }

    override func readNext(
        into buffer: UnsafeMutableRawBufferPointer, for token: UInt64, waker: CRequest?
    ) throws -> Int {
        let n = try body(buffer)
        guard n >= 0, n <= buffer.count else {
            throw BodyStreamError(
                description: "the body closure returned \(n) for a buffer of \(buffer.count) bytes")
        }
        return n
    }
}

/// Memory, file and stream pieces read in order: a multipart form with a stream part.
final class CompositeBody: BodyStream, @unchecked Sendable {
    enum Piece {
        case data(Data)
        case file(path: String, offset: UInt64, end: UInt64)
        case stream(BodyStream)
    }

    private let pieces: [Piece]
    private var index = 0
    private var position: UInt64 = 0  // within the current piece
    private var fd: Int32 = -1

    init(_ pieces: [Piece]) {
        self.pieces = pieces
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    override func attemptEnded(_ token: UInt64) {
        for case .stream(let stream) in pieces { stream.attemptEnded(token) }
    }

    override func readNext(
        into buffer: UnsafeMutableRawBufferPointer, for token: UInt64, waker: CRequest?
    ) throws -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var done = 0
        while done < buffer.count, index < pieces.count {
            let room = UnsafeMutableRawBufferPointer(start: base + done, count: buffer.count - done)
            var n = 0
            switch pieces[index] {
            case .data(let data):
                let left = data.count - Int(position)
                n = min(left, room.count)
                if n > 0 {
                    let start = data.startIndex + Int(position)
                    data[start..<(start + n)].withUnsafeBytes { room.copyMemory(from: $0) }
                }
            case .file(let path, let offset, let end):
                if fd < 0 {
                    fd = open(path, O_RDONLY | O_CLOEXEC)
                    if fd < 0 {
                        throw BodyStreamError(
                            description: "open \(path): \(String(cString: strerror(errno)))")
                    }
                }
                var want = room.count
                if end > 0 { want = Int(min(UInt64(want), end - min(end, offset + position))) }
                if want > 0 {
                    let k = pread(fd, room.baseAddress, want, off_t(offset + position))
                    if k < 0 {
                        if errno == EINTR { continue }
                        throw BodyStreamError(
                            description: "read \(path): \(String(cString: strerror(errno)))")
                    }
                    n = k
                }
                if n == 0, end > 0, offset + position < end {
                    throw BodyStreamError(description: "read \(path): file shrank while uploading")
                }
            case .stream(let stream):
                n = try stream.read(into: room, for: token, waker: waker)
                if n == BodyStream.notReady {
                    return done > 0 ? done : n  // send what is there; asked again on resume
                }
            }
            if n == 0 {
                if fd >= 0 {
                    close(fd)
                    fd = -1
                }
                index += 1
                position = 0
            } else {
                position += UInt64(n)
                done += n
            }
        }
        return done
    }
}
