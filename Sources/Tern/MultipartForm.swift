// MultipartForm: multipart/form-data (RFC 7578) built as a list of memory and file segments,
// so a file part is read from disk while sending and the Content-Length is known up front
// (ASIFormDataRequest's setFile:forKey:, AeroGear's MultiPartData, Mesibo's uploadFile).

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A `multipart/form-data` form: fields, in-memory data and files, sent in order.
///
/// File parts are streamed from disk through the connection buffer while the request is
/// sent, never loaded into memory, and may send only a byte range of the file (Mesibo's
/// `uploadOffset`/`uploadEnd`). The file name defaults to the file's last path component and
/// the content type to one guessed from its extension (``contentType(forPathExtension:)``).
///
/// ```swift
/// var form = MultipartForm()
/// form.addField("title", value: "Holiday")
/// form.addFile(at: "/tmp/beach.jpg", name: "photo")
/// form.addData(thumbnail, name: "thumb", fileName: "thumb.png", contentType: "image/png")
/// request.requestBody = .multipart(form)
/// request.downloadFile = "/tmp/receipt.json"  // a download can go with it
/// ```
///
/// When every part's size is known, the request carries a `Content-Length` computed as it
/// starts (from the files' sizes then); a form with a
/// ``Part/stream(name:fileName:contentType:_:)`` part is sent chunked.
public struct MultipartForm: Sendable {
    /// One part of a form.
    public struct Part: Sendable {
        enum Content: Sendable {
            case data(Data)
            case file(path: String, offset: UInt64, end: UInt64)
            case stream(BodyStream)
        }

        /// The form field's name.
        public var name: String
        /// The file name sent with the part, or `nil` for a plain field.
        public var fileName: String?
        /// The part's `Content-Type`, or `nil` to send none (as for plain fields).
        public var contentType: String?
        let content: Content

        /// A plain text field.
        ///
        /// - Parameters:
        ///   - name: The field's name.
        ///   - value: Its value, sent as UTF-8.
        public static func field(_ name: String, value: String) -> Part {
            Part(name: name, fileName: nil, contentType: nil, content: .data(Data(value.utf8)))
        }

        /// A field whose value is a file's contents, sent without a file name (curl's
        /// `-F name=<file`); streamed from disk.
        ///
        /// - Parameters:
        ///   - name: The field's name.
        ///   - path: The file holding the value.
        ///   - contentType: A `Content-Type` for the part, if any.
        public static func field(
            _ name: String, contentsOf path: String, contentType: String? = nil
        ) -> Part {
            Part(
                name: name, fileName: nil, contentType: contentType,
                content: .file(path: path, offset: 0, end: 0))
        }

        /// Bytes from memory, as a file upload when `fileName` is given
        /// (ASIFormDataRequest's `addData:withFileName:andContentType:forKey:`).
        ///
        /// - Parameters:
        ///   - data: The part's content.
        ///   - name: The field's name.
        ///   - fileName: The file name to send, if any.
        ///   - contentType: The content type; `nil` guesses it from `fileName`'s extension
        ///     when there is a file name, else sends none.
        public static func data(
            _ data: Data, name: String, fileName: String? = nil, contentType: String? = nil
        ) -> Part {
            Part(
                name: name, fileName: fileName,
                contentType: contentType
                    ?? fileName.map { MultipartForm.contentType(forPathExtension: pathExtension($0)) },
                content: .data(data))
        }

        /// A file, or the byte range `offset..<end` of it, streamed from disk.
        ///
        /// - Parameters:
        ///   - path: The file to send.
        ///   - name: The field's name.
        ///   - fileName: The file name to send; `nil` sends the path's last component.
        ///   - contentType: The content type; `nil` guesses it from the extension.
        ///   - offset: The first byte to send (default 0).
        ///   - end: The byte after the last one to send; `nil` sends to the end of the file.
        public static func file(
            _ path: String, name: String, fileName: String? = nil, contentType: String? = nil,
            offset: UInt64 = 0, end: UInt64? = nil
        ) -> Part {
            let sentName = fileName ?? URL(fileURLWithPath: path).lastPathComponent
            return Part(
                name: name, fileName: sentName,
                contentType: contentType
                    ?? MultipartForm.contentType(forPathExtension: pathExtension(sentName)),
                content: .file(path: path, offset: offset, end: end ?? 0))
        }

        /// Bytes produced by a closure, of unknown length; the form is then sent chunked. The
        /// rules of ``RequestBody/stream(length:contentType:_:)`` apply: the closure runs on
        /// the engine's thread, fills the buffer it is given and returns the byte count (0 at
        /// the end), and the part can be sent once.
        ///
        /// (`TernFoundation` adds a variant that reads a Foundation `InputStream`.)
        ///
        /// - Parameters:
        ///   - name: The field's name.
        ///   - fileName: The file name to send, if any.
        ///   - contentType: The content type (default `application/octet-stream`).
        ///   - read: Fills a buffer; returns the byte count, 0 at the end.
        public static func stream(
            name: String, fileName: String? = nil,
            contentType: String? = "application/octet-stream",
            _ read: @escaping @Sendable (UnsafeMutableRawBufferPointer) throws -> Int
        ) -> Part {
            Part(
                name: name, fileName: fileName, contentType: contentType,
                content: .stream(ClosureBody(read)))
        }

        /// The part's header block: boundary line, Content-Disposition, Content-Type, blank
        /// line.
        func head(boundary: String) -> Data {
            var text = "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(escape(name))\""
            if let fileName { text += "; filename=\"\(escape(fileName))\"" }
            text += "\r\n"
            if let contentType {
                // Per scalar: Swift's Character "\r\n" is neither "\r" nor "\n", so a
                // Character filter let a CR LF pair through and start a header line of its own.
                var value = String.UnicodeScalarView()
                for scalar in contentType.unicodeScalars {
                    value.append(scalar.value < 0x20 || scalar.value == 0x7f ? " " : scalar)
                }
                text += "Content-Type: \(String(value))\r\n"
            }
            return Data((text + "\r\n").utf8)
        }

        /// Quotes a name as browsers do (WHATWG): `"` CR LF become `%22` `%0D` `%0A`.
        private func escape(_ text: String) -> String {
            var out = ""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "%22"
                case "\r": out += "%0D"
                case "\n": out += "%0A"
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out
        }
    }

    /// The delimiter between parts (70 characters at most, never inside the content).
    public let boundary: String

    /// The parts, in the order they are sent.
    public private(set) var parts: [Part] = []

    /// Creates an empty form.
    ///
    /// - Parameter boundary: The delimiter; `nil` picks a random one, which is what you want
    ///   unless a test needs fixed bytes. One that RFC 2046 does not allow (a line break, more
    ///   than 70 characters) is replaced by a random one too.
    public init(boundary: String? = nil) {
        if let boundary, Self.isValidBoundary(boundary) {
            self.boundary = boundary
        } else {
            let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
            var generator = SystemRandomNumberGenerator()
            self.boundary = "tern-"
                + String((0..<32).map { _ in alphabet.randomElement(using: &generator)! })
        }
    }

    /// RFC 2046's rule: 1 to 70 of `bchars` (digits, letters, `'()+_,-./:=? ` and space),
    /// not ending in a space. Anything else (a CR LF above all) would corrupt the head.
    static func isValidBoundary(_ text: String) -> Bool {
        let scalars = Array(text.unicodeScalars)
        guard (1...70).contains(scalars.count), scalars.last != " " else { return false }
        return scalars.allSatisfy { s in
            (s.value >= 0x30 && s.value <= 0x39) || (s.value >= 0x41 && s.value <= 0x5a)
                || (s.value >= 0x61 && s.value <= 0x7a) || "'()+_,-./:=? ".unicodeScalars.contains(s)
        }
    }

    /// The request's `Content-Type`: `multipart/form-data; boundary=...`.
    public var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    /// True when the form has no part.
    public var isEmpty: Bool { parts.isEmpty }

    /// Appends a part.
    public mutating func append(_ part: Part) {
        parts.append(part)
    }

    /// Inserts parts before the others (used to put a request's post values first).
    mutating func prepend(_ newParts: [Part]) {
        parts.insert(contentsOf: newParts, at: 0)
    }

    /// Appends a text field (ASIFormDataRequest's `addPostValue:forKey:`).
    ///
    /// - Parameters:
    ///   - name: The field's name.
    ///   - value: Its value.
    public mutating func addField(_ name: String, value: String) {
        append(.field(name, value: value))
    }

    /// Appends a file, or a byte range of it, streamed from disk (ASIFormDataRequest's
    /// `setFile:forKey:`, Mesibo's `uploadFile` with `uploadFileField`, `uploadFileName`,
    /// `uploadFileType`, `uploadOffset`, `uploadEnd` and `uploadFileOffsetField`).
    ///
    /// - Parameters:
    ///   - path: The file to send.
    ///   - name: The field's name.
    ///   - fileName: The file name to send; `nil` sends the path's last component.
    ///   - contentType: The content type; `nil` guesses it from the extension.
    ///   - offset: The first byte to send.
    ///   - end: The byte after the last one; `nil` sends to the end of the file.
    ///   - offsetField: When given, a text field of this name carrying `offset` goes just
    ///     before the file, so a server receiving pieces of a file knows where this one
    ///     belongs (Mesibo's `uploadFileOffsetField`).
    public mutating func addFile(
        at path: String, name: String, fileName: String? = nil, contentType: String? = nil,
        offset: UInt64 = 0, end: UInt64? = nil, offsetField: String? = nil
    ) {
        if let offsetField { addField(offsetField, value: String(offset)) }
        append(
            .file(
                path, name: name, fileName: fileName, contentType: contentType, offset: offset,
                end: end))
    }

    /// Appends bytes from memory as a file upload (ASIFormDataRequest's
    /// `addData:withFileName:andContentType:forKey:`).
    ///
    /// - Parameters:
    ///   - data: The content.
    ///   - name: The field's name.
    ///   - fileName: The file name to send, if any.
    ///   - contentType: The content type; `nil` guesses it from `fileName`.
    public mutating func addData(
        _ data: Data, name: String, fileName: String? = nil, contentType: String? = nil
    ) {
        append(.data(data, name: name, fileName: fileName, contentType: contentType))
    }

    /// The body as the engine sends it: segments when every size is known, else a stream.
    func storage() -> RequestBody.Storage {
        var segments: [BodySegment] = []
        var pending = Data()
        var hasStream = false
        var pieces: [CompositeBody.Piece] = []
        func flush() {
            guard !pending.isEmpty else { return }
            segments.append(.data(pending))
            pieces.append(.data(pending))
            pending = Data()
        }
        for part in parts {
            pending.append(part.head(boundary: boundary))
            switch part.content {
            case .data(let data):
                pending.append(data)
            case .file(let path, let offset, let end):
                flush()
                segments.append(.file(path: path, offset: offset, end: end))
                pieces.append(.file(path: path, offset: offset, end: end))
            case .stream(let stream):
                flush()
                hasStream = true
                pieces.append(.stream(stream))
            }
            pending.append(Data("\r\n".utf8))
        }
        pending.append(Data("--\(boundary)--\r\n".utf8))
        flush()
        return hasStream ? .stream(length: nil, CompositeBody(pieces)) : .segments(segments)
    }

    /// A media type for a file extension, from a small built-in table of common types;
    /// `application/octet-stream` for anything else.
    ///
    /// - Parameter pathExtension: The extension without its dot, such as `"png"` (any case).
    /// - Returns: The media type, such as `"image/png"`.
    public static func contentType(forPathExtension pathExtension: String) -> String {
        mediaTypes[pathExtension.lowercased()] ?? "application/octet-stream"
    }

    private static let mediaTypes: [String: String] = [
        "txt": "text/plain", "text": "text/plain", "log": "text/plain",
        "html": "text/html", "htm": "text/html", "css": "text/css", "csv": "text/csv",
        "md": "text/markdown", "js": "text/javascript", "mjs": "text/javascript",
        "json": "application/json", "xml": "application/xml", "pdf": "application/pdf",
        "zip": "application/zip", "gz": "application/gzip", "tgz": "application/gzip",
        "tar": "application/x-tar", "bz2": "application/x-bzip2", "xz": "application/x-xz",
        "7z": "application/x-7z-compressed", "wasm": "application/wasm",
        "doc": "application/msword",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls": "application/vnd.ms-excel",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif",
        "webp": "image/webp", "svg": "image/svg+xml", "ico": "image/vnd.microsoft.icon",
        "bmp": "image/bmp", "tif": "image/tiff", "tiff": "image/tiff", "heic": "image/heic",
        "avif": "image/avif",
        "mp3": "audio/mpeg", "wav": "audio/wav", "ogg": "audio/ogg", "oga": "audio/ogg",
        "m4a": "audio/mp4", "aac": "audio/aac", "flac": "audio/flac", "opus": "audio/opus",
        "mp4": "video/mp4", "m4v": "video/mp4", "mov": "video/quicktime", "webm": "video/webm",
        "mkv": "video/x-matroska", "avi": "video/x-msvideo", "mpeg": "video/mpeg",
        "3gp": "video/3gpp",
    ]
}

/// The extension of a file name ("photo.JPG" -> "JPG"), or "" when it has none.
private func pathExtension(_ name: String) -> String {
    guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "" }
    return String(name[name.index(after: dot)...])
}
