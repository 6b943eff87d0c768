// Conveniences for everyday use: header fields by plain names, a listener that returns
// nothing, and file locations as URLs.

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

extension Request {
    /// Sets a header field by name, replacing any field of that name; `nil` removes it.
    ///
    /// ```swift
    /// request.setHeader("X-Request-ID", "42")
    /// ```
    ///
    /// A name that is not a valid field name, or a value holding CR, LF or NUL, makes the
    /// request fail with ``TernError/Code/badHeader`` when it runs, before anything is sent.
    /// ``headerFields`` takes typed `HTTPField.Name`s for the same purpose.
    public func setHeader(_ name: String, _ value: String?) {
        storage.withLock { s in
            guard let fieldName = HTTPField.Name(name) else {
                s.settings.invalidHeader = name
                return
            }
            if let value, value.utf8.contains(where: { $0 == 0 || $0 == 10 || $0 == 13 }) {
                s.settings.invalidHeader = name
                return
            }
            s.settings.headerFields[fieldName] = value
        }
    }

    /// The value of the header field `name` to be sent (fields of the same name joined with
    /// ", "), or `nil`.
    public func header(_ name: String) -> String? {
        guard let fieldName = HTTPField.Name(name) else { return nil }
        return headerFields[fieldName]
    }

    /// Sets a listener that returns nothing: it receives the request, direction and percent
    /// on ``callbackQueue`` and never cancels (call ``cancel()`` for that).
    ///
    /// ```swift
    /// let percents = Percents()  // a Sendable collector, such as a class with a lock
    /// request.setListener { _, state, percent in percents.append(percent) }
    /// ```
    ///
    /// - Returns: The request, for chaining.
    @discardableResult
    public func setListener(_ listener: @escaping @Sendable (Request, State, Int) -> Void) -> Self {
        self.listener = { request, state, percent in
            listener(request, state, percent)
            return true
        }
        return self
    }

    /// ``downloadFile`` as a file URL.
    public var downloadFileURL: URL? {
        get { downloadFile.map { URL(fileURLWithPath: $0) } }
        set { downloadFile = newValue?.path }
    }

    /// ``bodyFile`` as a file URL.
    public var bodyFileURL: URL? {
        get { bodyFile.map { URL(fileURLWithPath: $0) } }
        set { bodyFile = newValue?.path }
    }
}
