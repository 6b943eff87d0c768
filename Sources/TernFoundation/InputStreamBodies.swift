// TernFoundation: Foundation's InputStream as a request body or a multipart part. Tern itself
// imports only FoundationEssentials, which has no InputStream; these overloads are the
// InputStream-taking API that Tern had, built on its closure-based stream bodies, for programs
// that link full Foundation anyway.

public import Foundation
public import Tern

extension RequestBody {
    /// The bytes of an `InputStream`, read on the engine's thread as the connection can take
    /// them.
    ///
    /// Tern opens the stream, reads it to its end and closes it; do not touch it afterwards.
    /// Because reads run on the engine's thread, the stream must not block for long: a
    /// stream over a file or memory is fine, one over a slow pipe or socket stalls every
    /// request of the engine while it waits (for such a source, hand its bytes to Tern's
    /// `RequestBody.stream(_:length:contentType:)` as an `AsyncSequence` of chunks instead).
    ///
    /// A stream can be read once: a request with a stream body is not retried once reading
    /// began, cannot follow a 307/308 redirect, and executing the request again fails with
    /// `TernError.Code.fileReadFailed` unless a new body is set.
    ///
    /// ```swift
    /// import Tern
    /// import TernFoundation
    ///
    /// request.requestBody = .stream(InputStream(fileAtPath: "/var/log/app.log")!)
    /// ```
    ///
    /// Without Foundation, `RequestBody.stream(length:contentType:_:)` takes a closure that
    /// fills a buffer instead.
    ///
    /// - Parameters:
    ///   - stream: The stream to send.
    ///   - length: Its length in bytes when known (sent as `Content-Length`; the stream must
    ///     then hold exactly that many); `nil` sends the body chunked.
    ///   - contentType: Its media type, if any.
    public static func stream(
        _ stream: InputStream, length: UInt64? = nil, contentType: String? = nil
    ) -> RequestBody {
        let reader = InputStreamReader(stream)
        return .stream(length: length, contentType: contentType) { try reader.read(into: $0) }
    }
}

extension MultipartForm.Part {
    /// The bytes of an `InputStream` of unknown length; the form is then sent chunked. The
    /// rules of `RequestBody.stream(_:length:contentType:)` for an `InputStream` apply.
    ///
    /// - Parameters:
    ///   - stream: The stream, read on the engine's thread.
    ///   - name: The field's name.
    ///   - fileName: The file name to send, if any.
    ///   - contentType: The content type (default `application/octet-stream`).
    public static func stream(
        _ stream: InputStream, name: String, fileName: String? = nil,
        contentType: String? = "application/octet-stream"
    ) -> MultipartForm.Part {
        let reader = InputStreamReader(stream)
        return .stream(name: name, fileName: fileName, contentType: contentType) {
            try reader.read(into: $0)
        }
    }
}

/// Why reading an InputStream failed; its text ends up in the request's error message.
struct InputStreamReadError: Error, CustomStringConvertible {
    var description: String
}

/// Reads an InputStream: opened on the first read, closed at its end.
///
/// `@unchecked Sendable`: the stream is touched only on the engine's loop thread, by the one
/// attempt that claimed the body (Tern refuses a second reader), never concurrently.
final class InputStreamReader: @unchecked Sendable {
    private let stream: InputStream
    private var opened = false
    private var closed = false

    init(_ stream: InputStream) {
        self.stream = stream
    }

    deinit {
        if opened && !closed { stream.close() }
    }

    /// Fills `buffer` with the next bytes; 0 at the end.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard !closed, let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
        if !opened {
            opened = true
            if stream.streamStatus == .notOpen { stream.open() }
        }
        let n = stream.read(base.assumingMemoryBound(to: UInt8.self), maxLength: buffer.count)
        if n < 0 {
            let reason = stream.streamError.map { "\($0.localizedDescription)" } ?? "read error"
            closed = true
            stream.close()
            throw InputStreamReadError(description: "reading the body stream failed: \(reason)")
        }
        if n == 0 {
            closed = true
            stream.close()
        }
        return n
    }
}
