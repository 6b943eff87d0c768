// Client: requests relative to a base URL with a request serializer, default header fields and
// a validation step, in async/await (AeroGear's Http with its serializers).

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes

/// A client for one service: paths relative to a base URL, parameters through a
/// ``RequestSerializer``, responses checked by a ``ResponseValidation``.
///
/// ```swift
/// let api = Client(baseURL: URL(string: "https://api.example.com/v1")!,
///                  requestSerializer: .json)
/// let user = try await api.get("users/7", as: .json(User.self))
/// try await api.post("users", parameters: NewUser(name: "Ada"))
/// let hits = try await api.get("search", parameters: ["q": "tern"]).data
/// ```
///
/// Paths are appended to the base URL (`"users/7"` and `"/users/7"` both give
/// `https://api.example.com/v1/users/7`); a full URL is used as it is. GET, HEAD and DELETE
/// parameters go into the query; the other methods' into the body, as the serializer says.
///
/// Every method runs one ``Request``; ``request(_:_:parameters:headers:)`` returns it unsent
/// for callback-style use or further settings.
public final class Client: Sendable {
    /// The URL paths are appended to.
    public let baseURL: URL
    /// The engine the requests run on.
    public let engine: Engine
    /// Header fields sent with every request (a request's own `headers` of the same name
    /// replace them).
    public let headerFields: HTTPFields
    /// How parameters are written into requests.
    public let requestSerializer: any RequestSerializer
    /// What the convenience methods accept; others throw ``ResponseError``.
    public let validation: ResponseValidation
    private let prepare: (@Sendable (Request) -> Void)?

    /// Creates a client.
    ///
    /// - Parameters:
    ///   - baseURL: The URL paths are appended to.
    ///   - engine: The engine to run on (default ``Engine/shared``).
    ///   - headerFields: Header fields for every request.
    ///   - requestSerializer: How parameters are encoded (default: URL-encoded).
    ///   - validation: What responses are accepted (default: 2xx statuses).
    ///   - prepare: Called with every new request before it is sent, to set anything else
    ///     (timeouts, ``Request/tls``, a listener...). Requests deliver events on a global
    ///     queue unless this sets another ``Request/callbackQueue``.
    public init(
        baseURL: URL, engine: Engine = .shared, headerFields: HTTPFields = [:],
        requestSerializer: any RequestSerializer = URLEncodedRequestSerializer(),
        validation: ResponseValidation = .successfulStatus,
        prepare: (@Sendable (Request) -> Void)? = nil
    ) {
        self.baseURL = baseURL
        self.engine = engine
        self.headerFields = headerFields
        self.requestSerializer = requestSerializer
        self.validation = validation
        self.prepare = prepare
    }

    /// The URL for a path: appended to ``baseURL``, or the path itself when it is a full URL.
    ///
    /// - Parameter path: A path such as `"users/7?full=1"`, or a URL.
    /// - Returns: The URL, or `nil` when the result is not a URL.
    public func url(for path: String) -> URL? {
        if let url = URL(string: path), url.scheme != nil { return url }
        var base = baseURL.absoluteString
        if let cut = base.firstIndex(where: { $0 == "?" || $0 == "#" }) { base = String(base[..<cut]) }
        while base.hasSuffix("/") { base.removeLast() }
        var rest = Substring(path)
        while rest.hasPrefix("/") { rest = rest.dropFirst() }
        return URL(string: rest.isEmpty ? base + "/" : base + "/" + rest)
    }

    /// Builds a request, not yet sent: URL, header fields, serialized parameters, and the
    /// `prepare` closure applied.
    ///
    /// - Parameters:
    ///   - method: The method.
    ///   - path: The path (see ``url(for:)``).
    ///   - parameters: Values for the serializer, if any.
    ///   - headers: Header fields for this request.
    /// - Returns: The request.
    /// - Throws: ``TernError`` for a path that makes no URL; the serializer's error.
    public func request(
        _ method: HTTPRequest.Method, _ path: String,
        parameters: (any Encodable & Sendable)? = nil, headers: HTTPFields = [:]
    ) throws -> Request {
        guard let url = url(for: path) else {
            throw TernError(
                code: .badURL, message: "\(baseURL.absoluteString) + \"\(path)\" is not a URL",
                phase: .setup)
        }
        let request = Request(url: url, method: method)
        request.engine = engine
        request.callbackQueue = .global()
        var fields = headerFields
        for field in headers { fields[field.name] = nil }
        fields.append(contentsOf: headers)
        request.headerFields = fields
        if let parameters {
            try requestSerializer.serialize(parameters, into: request)
        }
        prepare?(request)
        return request
    }

    /// Sends a request and returns its response once it passed ``validation``.
    ///
    /// - Parameters:
    ///   - method: The method.
    ///   - path: The path (see ``url(for:)``).
    ///   - parameters: Values for the serializer, if any.
    ///   - headers: Header fields for this request.
    /// - Returns: The response.
    /// - Throws: ``TernError`` when the exchange failed, ``ResponseError`` when validation
    ///   refused the response.
    @discardableResult
    public func send(
        _ method: HTTPRequest.Method, _ path: String,
        parameters: (any Encodable & Sendable)? = nil, headers: HTTPFields = [:]
    ) async throws -> Response {
        let request = try request(method, path, parameters: parameters, headers: headers)
        return try await request.response().validate(validation)
    }

    /// Sends a request, validates the response with ``validation`` and then the serializer's
    /// own checks, and serializes it.
    ///
    /// - Parameters:
    ///   - method: The method.
    ///   - path: The path (see ``url(for:)``).
    ///   - parameters: Values for the serializer, if any.
    ///   - headers: Header fields for this request.
    ///   - serializer: Such as `.data`, `.string` or `.json(User.self)`.
    /// - Returns: The serializer's value.
    /// - Throws: ``TernError`` or ``ResponseError``.
    public func send<Serializer: ResponseSerializer>(
        _ method: HTTPRequest.Method, _ path: String,
        parameters: (any Encodable & Sendable)? = nil, headers: HTTPFields = [:],
        as serializer: Serializer
    ) async throws -> Serializer.Output {
        let response = try await send(method, path, parameters: parameters, headers: headers)
        return try serializer.process(response)
    }

    /// GET; parameters go into the query.
    ///
    /// - Parameters:
    ///   - path: The path (see ``url(for:)``).
    ///   - parameters: Query values, if any.
    ///   - headers: Header fields for this request.
    /// - Returns: The validated response.
    /// - Throws: ``TernError`` or ``ResponseError``.
    @discardableResult
    public func get(
        _ path: String, parameters: (any Encodable & Sendable)? = nil, headers: HTTPFields = [:]
    ) async throws -> Response {
        try await send(.get, path, parameters: parameters, headers: headers)
    }

    /// GET, serialized (such as `as: .json(User.self)`).
    ///
    /// - Parameters:
    ///   - path: The path (see ``url(for:)``).
    ///   - parameters: Query values, if any.
    ///   - headers: Header fields for this request.
    ///   - serializer: What to make of the response.
    /// - Returns: The serializer's value.
    /// - Throws: ``TernError`` or ``ResponseError``.
    public func get<Serializer: ResponseSerializer>(
        _ path: String, parameters: (any Encodable & Sendable)? = nil, headers: HTTPFields = [:],
        as serializer: Serializer
    ) async throws -> Serializer.Output {
        try await send(.get, path, parameters: parameters, headers: headers, as: serializer)
    }

    /// POST; parameters go into the body.
    ///
    /// - Parameters:
    ///   - path: The path (see ``url(for:)``).
    ///   - parameters: Body values, if any.
    ///   - headers: Header fields for this request.
    /// - Returns: The validated response.
    /// - Throws: ``TernError`` or ``ResponseError``.
    @discardableResult
    public func post(
        _ path: String, parameters: (any Encodable & Sendable)? = nil, headers: HTTPFields = [:]
    ) async throws -> Response {
        try await send(.post, path, parameters: parameters, headers: headers)
    }

    /// POST, serialized.
    ///
    /// - Parameters:
    ///   - path: The path (see ``url(for:)``).
    ///   - parameters: Body values, if any.
    ///   - headers: Header fields for this request.
    ///   - serializer: What to make of the response.
    /// - Returns: The serializer's value.
    /// - Throws: ``TernError`` or ``ResponseError``.
    public func post<Serializer: ResponseSerializer>(
        _ path: String, parameters: (any Encodable & Sendable)? = nil, headers: HTTPFields = [:],
        as serializer: Serializer
    ) async throws -> Serializer.Output {
        try await send(.post, path, parameters: parameters, headers: headers, as: serializer)
    }

    /// PUT; parameters go into the body.
    ///
    /// - Parameters:
    ///   - path: The path (see ``url(for:)``).
    ///   - parameters: Body values, if any.
    ///   - headers: Header fields for this request.
    /// - Returns: The validated response.
    /// - Throws: ``TernError`` or ``ResponseError``.
    @discardableResult
    public func put(
        _ path: String, parameters: (any Encodable & Sendable)? = nil, headers: HTTPFields = [:]
    ) async throws -> Response {
        try await send(.put, path, parameters: parameters, headers: headers)
    }

    /// PUT, serialized.
    ///
    /// - Parameters:
    ///   - path: The path (see ``url(for:)``).
    ///   - parameters: Body values, if any.
    ///   - headers: Header fields for this request.
    ///   - serializer: What to make of the response.
    /// - Returns: The serializer's value.
    /// - Throws: ``TernError`` or ``ResponseError``.
    public func put<Serializer: ResponseSerializer>(
        _ path: String, parameters: (any Encodable & Sendable)? = nil, headers: HTTPFields = [:],
        as serializer: Serializer
    ) async throws -> Serializer.Output {
        try await send(.put, path, parameters: parameters, headers: headers, as: serializer)
    }

    /// PATCH; parameters go into the body.
    ///
    /// - Parameters:
    ///   - path: The path (see ``url(for:)``).
    ///   - parameters: Body values, if any.
    ///   - headers: Header fields for this request.
    /// - Returns: The validated response.
    /// - Throws: ``TernError`` or ``ResponseError``.
    @discardableResult
    public func patch(
        _ path: String, parameters: (any Encodable & Sendable)? = nil, headers: HTTPFields = [:]
    ) async throws -> Response {
        try await send(.patch, path, parameters: parameters, headers: headers)
    }

    /// PATCH, serialized.
    ///
    /// - Parameters:
    ///   - path: The path (see ``url(for:)``).
    ///   - parameters: Body values, if any.
    ///   - headers: Header fields for this request.
    ///   - serializer: What to make of the response.
    /// - Returns: The serializer's value.
    /// - Throws: ``TernError`` or ``ResponseError``.
    public func patch<Serializer: ResponseSerializer>(
        _ path: String, parameters: (any Encodable & Sendable)? = nil, headers: HTTPFields = [:],
        as serializer: Serializer
    ) async throws -> Serializer.Output {
        try await send(.patch, path, parameters: parameters, headers: headers, as: serializer)
    }

    /// DELETE; parameters go into the query.
    ///
    /// - Parameters:
    ///   - path: The path (see ``url(for:)``).
    ///   - parameters: Query values, if any.
    ///   - headers: Header fields for this request.
    /// - Returns: The validated response.
    /// - Throws: ``TernError`` or ``ResponseError``.
    @discardableResult
    public func delete(
        _ path: String, parameters: (any Encodable & Sendable)? = nil, headers: HTTPFields = [:]
    ) async throws -> Response {
        try await send(.delete, path, parameters: parameters, headers: headers)
    }

    /// DELETE, serialized.
    ///
    /// - Parameters:
    ///   - path: The path (see ``url(for:)``).
    ///   - parameters: Query values, if any.
    ///   - headers: Header fields for this request.
    ///   - serializer: What to make of the response.
    /// - Returns: The serializer's value.
    /// - Throws: ``TernError`` or ``ResponseError``.
    public func delete<Serializer: ResponseSerializer>(
        _ path: String, parameters: (any Encodable & Sendable)? = nil, headers: HTTPFields = [:],
        as serializer: Serializer
    ) async throws -> Serializer.Output {
        try await send(.delete, path, parameters: parameters, headers: headers, as: serializer)
    }

    /// HEAD; parameters go into the query.
    ///
    /// - Parameters:
    ///   - path: The path (see ``url(for:)``).
    ///   - parameters: Query values, if any.
    ///   - headers: Header fields for this request.
    /// - Returns: The validated response (with no body).
    /// - Throws: ``TernError`` or ``ResponseError``.
    @discardableResult
    public func head(
        _ path: String, parameters: (any Encodable & Sendable)? = nil, headers: HTTPFields = [:]
    ) async throws -> Response {
        try await send(.head, path, parameters: parameters, headers: headers)
    }
}
