// Serializers (AeroGear's RequestSerializer/ResponseSerializer): parameters into a request as a
// URL query, a URL-encoded form or JSON; responses validated (status, content type) and turned
// into Data, String or a Decodable value, with ResponseError for what does not fit.

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import HTTPTypes

// MARK: - Request serializers

/// Puts parameters into a request: into its URL query or its body.
///
/// Two serializers are built in: ``URLEncodedRequestSerializer`` (`.urlEncoded`) and
/// ``JSONRequestSerializer`` (`.json`). Write your own for other formats:
///
/// ```swift
/// struct PlistSerializer: RequestSerializer {
///     func serialize(_ parameters: any Encodable & Sendable, into request: Request) throws {
///         let data = try PropertyListEncoder().encode(parameters)
///         request.requestBody = .data(data, contentType: "application/x-plist")
///     }
/// }
/// ```
public protocol RequestSerializer: Sendable {
    /// Writes `parameters` into `request` (its URL, body and header fields as needed).
    ///
    /// - Parameters:
    ///   - parameters: The values to send, such as a dictionary, a ``URLEncodedForm`` or any
    ///     `Encodable` value.
    ///   - request: The request to change.
    /// - Throws: When the parameters cannot be encoded.
    func serialize(_ parameters: any Encodable & Sendable, into request: Request) throws
}

/// URL-encodes parameters (`application/x-www-form-urlencoded`) into the URL query of GET,
/// HEAD and DELETE requests and into the body of the others (AeroGear's
/// `HttpRequestSerializer`).
///
/// A ``URLEncodedForm`` is sent as it is, in order. Other `Encodable` values must encode as
/// a keyed container (a struct or a dictionary); its keys are sorted, arrays become repeated
/// names (`tag=a&tag=b`), nested containers `outer[inner]=value`, and Booleans `true`/`false`.
public struct URLEncodedRequestSerializer: RequestSerializer {
    /// Where the encoded parameters go.
    public enum Destination: Sendable, Hashable {
        /// The URL query for GET, HEAD and DELETE, the body otherwise.
        case automatic
        /// Always the URL query.
        case query
        /// Always the body.
        case body
    }

    /// Where the encoded parameters go (default ``Destination/automatic``).
    public var destination: Destination

    /// Creates the serializer.
    ///
    /// - Parameter destination: Where the encoded parameters go.
    public init(destination: Destination = .automatic) {
        self.destination = destination
    }

    public func serialize(_ parameters: any Encodable & Sendable, into request: Request) throws {
        let form = try URLEncodedRequestSerializer.form(from: parameters)
        let toQuery: Bool
        switch destination {
        case .automatic: toQuery = [.get, .head, .delete].contains(request.method)
        case .query: toQuery = true
        case .body: toQuery = false
        }
        if toQuery {
            request.url = try appendingQuery(form.encodedString, to: request.url)
        } else {
            request.requestBody = .form(form)
        }
    }

    /// The fields an `Encodable` value flattens to (see the type's description).
    static func form(from parameters: any Encodable & Sendable) throws -> URLEncodedForm {
        if let form = parameters as? URLEncodedForm { return form }
        let json = try JSONEncoder().encode(parameters)
        let value = try JSONDecoder().decode(FormValue.self, from: json)
        guard case .object(let members) = value else {
            throw TernError(
                code: .invalidArgument,
                message: "URL-encoded parameters must be a struct or a dictionary, not \(type(of: parameters))",
                phase: .setup)
        }
        var form = URLEncodedForm()
        for key in members.keys.sorted() {
            members[key]?.flatten(name: key, into: &form)
        }
        return form
    }
}

/// Encodes parameters as a JSON body (`application/json`) with a `JSONEncoder`; GET, HEAD and
/// DELETE requests get them URL-encoded in the query instead (AeroGear's
/// `JsonRequestSerializer`).
public struct JSONRequestSerializer: RequestSerializer {
    /// The encoder (default: a plain `JSONEncoder`).
    public var encoder: JSONEncoder

    /// Creates the serializer.
    ///
    /// - Parameter encoder: The encoder to use.
    public init(encoder: JSONEncoder = JSONEncoder()) {
        self.encoder = encoder
    }

    public func serialize(_ parameters: any Encodable & Sendable, into request: Request) throws {
        if [.get, .head, .delete].contains(request.method) {
            try URLEncodedRequestSerializer(destination: .query).serialize(parameters, into: request)
        } else {
            request.requestBody = .data(try encoder.encode(parameters), contentType: "application/json")
        }
    }
}

extension RequestSerializer where Self == URLEncodedRequestSerializer {
    /// URL-encoded parameters: the query of GET, HEAD and DELETE, the body otherwise.
    public static var urlEncoded: URLEncodedRequestSerializer { URLEncodedRequestSerializer() }
}

extension RequestSerializer where Self == JSONRequestSerializer {
    /// A JSON body (a query for GET, HEAD and DELETE).
    public static var json: JSONRequestSerializer { JSONRequestSerializer() }
}

/// A JSON value on its way to form fields.
private enum FormValue: Decodable {
    case null
    case bool(Bool)
    case scalar(String)
    case array([FormValue])
    case object([String: FormValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .scalar(String(value))
        } else if let value = try? container.decode(Double.self) {
            self = .scalar("\(value)")
        } else if let value = try? container.decode(String.self) {
            self = .scalar(value)
        } else if let value = try? container.decode([FormValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: FormValue].self))
        }
    }

    func flatten(name: String, into form: inout URLEncodedForm) {
        switch self {
        case .null: break
        case .bool(let value): form.add(value ? "true" : "false", forName: name)
        case .scalar(let value): form.add(value, forName: name)
        case .array(let values): for value in values { value.flatten(name: name, into: &form) }
        case .object(let members):
            for key in members.keys.sorted() {
                members[key]?.flatten(name: "\(name)[\(key)]", into: &form)
            }
        }
    }
}

/// The URL with `query` (already encoded) appended to its query.
func appendingQuery(_ query: String, to url: URL) throws -> URL {
    guard !query.isEmpty else { return url }
    guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
        throw TernError(code: .badURL, message: "malformed URL \(url)", phase: .setup)
    }
    if let existing = components.percentEncodedQuery, !existing.isEmpty {
        components.percentEncodedQuery = existing + "&" + query
    } else {
        components.percentEncodedQuery = query
    }
    guard let result = components.url else {
        throw TernError(code: .badURL, message: "malformed URL \(url)?\(query)", phase: .setup)
    }
    return result
}

// MARK: - Validation

/// Checks a response before it is used, throwing ``ResponseError`` when it does not fit.
///
/// ``ResponseValidation`` is the closure-based conformer with the common checks built in.
public protocol ResponseValidator: Sendable {
    /// Throws when `response` is not acceptable.
    ///
    /// - Parameter response: The response to check.
    /// - Throws: ``ResponseError`` (or any error of your own) for a bad response.
    func validate(_ response: Response) throws
}

/// Checks a response's status and content type; or any check you write as a closure.
///
/// ```swift
/// let response = try await request.response()
///     .validate(.statusCodes(200..<300).and(.contentTypes(["application/json"])))
/// ```
public struct ResponseValidation: ResponseValidator {
    private let check: @Sendable (Response) throws -> Void

    /// A validation made of a closure.
    ///
    /// - Parameter check: Throws for a bad response.
    public init(_ check: @escaping @Sendable (Response) throws -> Void) {
        self.check = check
    }

    /// Accepts the given status codes and, when `contentTypes` is given, only those media
    /// types.
    ///
    /// - Parameters:
    ///   - statusCodes: The acceptable status codes (default 200..<300).
    ///   - contentTypes: Acceptable media types such as `"application/json"`, `"text/*"`,
    ///     `"application/*+json"` or `"*/*"`; a response without `Content-Type` passes only
    ///     when its body is empty. `nil` accepts any.
    public init(statusCodes: some Sequence<Int> = 200..<300, contentTypes: [String]? = nil) {
        let codes = Set(statusCodes)
        self.init { response in
            guard codes.contains(response.statusCode) else {
                throw ResponseError(
                    reason: .unacceptableStatus,
                    message: "unacceptable status \(response.statusCode)"
                        + (response.status.reasonPhrase.isEmpty ? "" : " \(response.status.reasonPhrase)")
                        + " from \(response.url.absoluteString)",
                    response: response)
            }
            if let contentTypes {
                try ResponseValidation.checkContentType(response, accepting: contentTypes)
            }
        }
    }

    public func validate(_ response: Response) throws {
        try check(response)
    }

    /// Both validations, this one first.
    ///
    /// - Parameter other: The validation to run next.
    /// - Returns: A validation that runs both.
    public func and(_ other: some ResponseValidator) -> ResponseValidation {
        ResponseValidation { response in
            try self.validate(response)
            try other.validate(response)
        }
    }

    static func checkContentType(_ response: Response, accepting patterns: [String]) throws {
        guard let value = response.contentType else {
            if response.data.isEmpty { return }
            throw ResponseError(
                reason: .unacceptableContentType,
                message: "response from \(response.url.absoluteString) has no Content-Type; "
                    + "expected \(patterns.joined(separator: ", "))",
                response: response)
        }
        let mediaType = value.split(separator: ";").first
            .map { $0.trimmingWhitespace().lowercased() } ?? ""
        let (type, subtype) = split(mediaType)
        for pattern in patterns {
            let (wantType, wantSubtype) = split(pattern.lowercased())
            let typeMatches = wantType == "*" || wantType == type
            let subtypeMatches =
                wantSubtype == "*" || wantSubtype == subtype
                || (wantSubtype.hasPrefix("*+") && subtype.hasSuffix(wantSubtype.dropFirst()))
            if typeMatches && subtypeMatches { return }
        }
        throw ResponseError(
            reason: .unacceptableContentType,
            message: "unacceptable Content-Type \"\(value)\" from \(response.url.absoluteString); "
                + "expected \(patterns.joined(separator: ", "))",
            response: response)
    }

    private static func split(_ mediaType: String) -> (String, String) {
        let parts = mediaType.split(separator: "/", maxSplits: 1)
        return (
            parts.first.map { String($0).trimmingWhitespace() } ?? "",
            parts.count > 1 ? String(parts[1]).trimmingWhitespace() : "")
    }
}

extension ResponseValidator where Self == ResponseValidation {
    /// Accepts 2xx statuses.
    public static var successfulStatus: ResponseValidation { ResponseValidation() }

    /// Accepts everything.
    public static var none: ResponseValidation { ResponseValidation { _ in } }

    /// Accepts the given statuses, any content type.
    ///
    /// - Parameter codes: The acceptable status codes, such as `200..<300` or `[200, 204]`.
    public static func statusCodes(_ codes: some Sequence<Int>) -> ResponseValidation {
        ResponseValidation(statusCodes: codes)
    }

    /// Accepts the given media types (see
    /// ``ResponseValidation/init(statusCodes:contentTypes:)``), any status.
    ///
    /// - Parameter types: Media types or patterns such as `"text/*"`.
    public static func contentTypes(_ types: [String]) -> ResponseValidation {
        ResponseValidation { try ResponseValidation.checkContentType($0, accepting: types) }
    }

    /// 2xx statuses with a JSON media type (`application/json` or `*/*+json`).
    public static var json: ResponseValidation {
        ResponseValidation(contentTypes: ["application/json", "*/*+json"])
    }
}

/// A response that failed validation or could not be serialized, with the response itself.
///
/// Match on ``reason``:
///
/// ```swift
/// do {
///     let user = try await client.get("/user/7", as: .json(User.self))
/// } catch let error as ResponseError where error.reason == .unacceptableStatus {
///     print(error.response.statusCode)
/// }
/// ```
public struct ResponseError: Error, Sendable, CustomStringConvertible {
    /// Why the response was refused; a struct so reasons can be added.
    public struct Reason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// A short name, such as `"unacceptableStatus"`.
        public let rawValue: String

        /// Wraps a reason name.
        public init(rawValue: String) {
            self.rawValue = rawValue
        }

        public var description: String { rawValue }

        /// The status is not one the validation accepts.
        public static let unacceptableStatus = Reason(rawValue: "unacceptableStatus")
        /// The content type is not one the validation accepts.
        public static let unacceptableContentType = Reason(rawValue: "unacceptableContentType")
        /// The body could not be turned into the wanted value (see ``underlyingError``).
        public static let serializationFailed = Reason(rawValue: "serializationFailed")
    }

    /// Why the response was refused.
    public let reason: Reason
    /// What was wrong, in words.
    public let message: String
    /// The response concerned.
    public let response: Response
    /// The error behind a serialization failure, such as a `DecodingError`.
    public let underlyingError: (any Error)?

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - reason: Why the response was refused.
    ///   - message: What was wrong.
    ///   - response: The response concerned.
    ///   - underlyingError: The error behind it, if any.
    public init(reason: Reason, message: String, response: Response, underlyingError: (any Error)? = nil) {
        self.reason = reason
        self.message = message
        self.response = response
        self.underlyingError = underlyingError
    }

    /// The response's status code.
    public var statusCode: Int { response.statusCode }

    public var description: String { "ResponseError.\(reason)(\(message))" }
}

// MARK: - Response serializers

/// Turns a validated response into a value (AeroGear's `ResponseSerializer`): first
/// ``ResponseValidator/validate(_:)`` (by default: a 2xx status), then ``serialize(_:)``.
///
/// Built in: `.data`, `.string` and `.json(Type.self)`:
///
/// ```swift
/// let user = try await request.response(as: .json(User.self))
/// ```
public protocol ResponseSerializer<Output>: ResponseValidator {
    /// The value made from a response.
    associatedtype Output: Sendable

    /// Makes the value from a response that passed validation.
    ///
    /// - Parameter response: The response.
    /// - Returns: The value.
    /// - Throws: ``ResponseError`` with ``ResponseError/Reason/serializationFailed`` (or any
    ///   error) when the body does not fit.
    func serialize(_ response: Response) throws -> Output
}

extension ResponseSerializer {
    /// Accepts 2xx statuses; conformers override it to check more or less.
    public func validate(_ response: Response) throws {
        try ResponseValidation.successfulStatus.validate(response)
    }

    /// Validates, then serializes.
    ///
    /// - Parameter response: The response.
    /// - Returns: The value.
    /// - Throws: The validation's or the serialization's error.
    public func process(_ response: Response) throws -> Output {
        try validate(response)
        return try serialize(response)
    }
}

/// The body as bytes.
public struct DataResponseSerializer: ResponseSerializer {
    /// The validation run first (default: 2xx).
    public var validation: ResponseValidation

    /// Creates the serializer.
    ///
    /// - Parameter validation: The validation run first.
    public init(validation: ResponseValidation = .successfulStatus) {
        self.validation = validation
    }

    public func validate(_ response: Response) throws {
        try validation.validate(response)
    }

    public func serialize(_ response: Response) throws -> Data {
        response.data
    }
}

/// The body as text, in the charset `Content-Type` names (else ISO-8859-1, UTF-8 for JSON),
/// or in a fixed encoding.
public struct StringResponseSerializer: ResponseSerializer {
    /// The text encoding, or `nil` to follow `Content-Type` (see ``Response/string``).
    public var encoding: String.Encoding?
    /// The validation run first (default: 2xx).
    public var validation: ResponseValidation

    /// Creates the serializer.
    ///
    /// - Parameters:
    ///   - encoding: A fixed encoding, or `nil` to follow `Content-Type`.
    ///   - validation: The validation run first.
    public init(encoding: String.Encoding? = nil, validation: ResponseValidation = .successfulStatus) {
        self.encoding = encoding
        self.validation = validation
    }

    public func validate(_ response: Response) throws {
        try validation.validate(response)
    }

    public func serialize(_ response: Response) throws -> String {
        let text = encoding.map { String(data: response.data, encoding: $0) } ?? response.string
        guard let text else {
            throw ResponseError(
                reason: .serializationFailed,
                message: "the body from \(response.url.absoluteString) is not valid text in "
                    + "\(encoding.map { "\($0)" } ?? response.contentType ?? "its charset")",
                response: response)
        }
        return text
    }
}

/// The body decoded from JSON into a `Decodable` value.
public struct JSONResponseSerializer<Value: Decodable & Sendable>: ResponseSerializer {
    /// The decoder (default: a plain `JSONDecoder`).
    public var decoder: JSONDecoder
    /// The validation run first (default ``ResponseValidation/json``: 2xx and a JSON media
    /// type).
    public var validation: ResponseValidation

    /// Creates the serializer.
    ///
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - decoder: The decoder to use.
    ///   - validation: The validation run first.
    public init(
        _ type: Value.Type = Value.self, decoder: JSONDecoder = JSONDecoder(),
        validation: ResponseValidation = .json
    ) {
        self.decoder = decoder
        self.validation = validation
    }

    public func validate(_ response: Response) throws {
        try validation.validate(response)
    }

    public func serialize(_ response: Response) throws -> Value {
        do {
            return try decoder.decode(Value.self, from: response.data)
        } catch {
            throw ResponseError(
                reason: .serializationFailed,
                message: "cannot decode \(Value.self) from the JSON body of "
                    + "\(response.url.absoluteString) (\(response.data.count) bytes): \(error)",
                response: response, underlyingError: error)
        }
    }
}

extension ResponseSerializer where Self == DataResponseSerializer {
    /// The body as bytes, for 2xx statuses.
    public static var data: DataResponseSerializer { DataResponseSerializer() }
}

extension ResponseSerializer where Self == StringResponseSerializer {
    /// The body as text, for 2xx statuses.
    public static var string: StringResponseSerializer { StringResponseSerializer() }
}

extension ResponseSerializer {
    /// The body decoded from JSON, for 2xx statuses with a JSON media type.
    ///
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - decoder: The decoder to use.
    /// - Returns: The serializer.
    public static func json<Value>(
        _ type: Value.Type, decoder: JSONDecoder = JSONDecoder()
    ) -> JSONResponseSerializer<Value> where Self == JSONResponseSerializer<Value> {
        JSONResponseSerializer(type, decoder: decoder)
    }
}

// MARK: - Conveniences on Request and Response

extension Request {
    /// Writes parameters into this request with a serializer (default: URL-encoded, in the
    /// query of GET, HEAD and DELETE and in the body otherwise).
    ///
    /// - Parameters:
    ///   - parameters: The values to send.
    ///   - serializer: How to encode them.
    /// - Returns: The request, for chaining.
    /// - Throws: When the parameters cannot be encoded.
    @discardableResult
    public func setParameters(
        _ parameters: any Encodable & Sendable,
        using serializer: any RequestSerializer = URLEncodedRequestSerializer()
    ) throws -> Self {
        try serializer.serialize(parameters, into: self)
        return self
    }

    /// Runs the request, then validates and serializes its response.
    ///
    /// - Parameter serializer: Such as `.data`, `.string` or `.json(User.self)`.
    /// - Returns: The serializer's value.
    /// - Throws: ``TernError`` when the exchange failed, ``ResponseError`` when the response
    ///   did not pass validation or serialization.
    public func response<Serializer: ResponseSerializer>(
        as serializer: Serializer
    ) async throws -> Serializer.Output {
        try serializer.process(try await response())
    }
}

extension Response {
    /// Throws when the response does not pass `validation`; returns it otherwise, for
    /// chaining.
    ///
    /// - Parameter validation: The checks (default: a 2xx status).
    /// - Returns: This response.
    /// - Throws: ``ResponseError`` from the built-in validations.
    @discardableResult
    public func validate(
        _ validation: some ResponseValidator = ResponseValidation.successfulStatus
    ) throws -> Response {
        try validation.validate(self)
        return self
    }

    /// Decodes the body from JSON (without validating the response first).
    ///
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - decoder: The decoder to use.
    /// - Returns: The value.
    /// - Throws: ``ResponseError`` with ``ResponseError/Reason/serializationFailed``.
    public func decode<Value: Decodable & Sendable>(
        _ type: Value.Type, decoder: JSONDecoder = JSONDecoder()
    ) throws -> Value {
        try JSONResponseSerializer(type, decoder: decoder).serialize(self)
    }
}
