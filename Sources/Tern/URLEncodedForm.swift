// URL-encoded forms (application/x-www-form-urlencoded, WHATWG URL standard §5): the urlEncode
// helper and URLEncodedForm, an ordered list of name/value pairs where names may repeat
// (ASIHTTPRequest's setPostValue/addPostValue, Mesibo's postBundle).

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Encodes a string the way HTML forms do (`application/x-www-form-urlencoded`, as the WHATWG
/// URL standard defines it).
///
/// The string's UTF-8 bytes are kept when they are ASCII letters, digits or one of `*-._`;
/// a space becomes `+`; every other byte becomes `%XX` (upper-case hex).
///
/// ```swift
/// urlEncode("a b&c=ü")  // "a+b%26c%3D%C3%BC"
/// ```
///
/// - Parameter string: The text to encode, such as a form field's name or value.
/// - Returns: The encoded text, safe in a query string or a form body.
public func urlEncode(_ string: String) -> String {
    var out = [UInt8]()
    out.reserveCapacity(string.utf8.count)
    let hex = Array("0123456789ABCDEF".utf8)
    for byte in string.utf8 {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "*"), UInt8(ascii: "-"),
            UInt8(ascii: "."), UInt8(ascii: "_"):
            out.append(byte)
        case UInt8(ascii: " "):
            out.append(UInt8(ascii: "+"))
        default:
            out.append(UInt8(ascii: "%"))
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0F)])
        }
    }
    return String(decoding: out, as: UTF8.self)
}

/// Decodes form encoding: `+` becomes a space and `%XX` the byte it names.
///
/// Malformed escapes are kept as they are, as the WHATWG parser does; bytes that do not form
/// UTF-8 become U+FFFD.
///
/// - Parameter string: Encoded text, such as one side of a `name=value` pair.
/// - Returns: The decoded text.
public func urlDecode(_ string: String) -> String {
    let bytes = Array(string.utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes.count)
    func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
    var i = 0
    while i < bytes.count {
        let c = bytes[i]
        if c == UInt8(ascii: "+") {
            out.append(UInt8(ascii: " "))
        } else if c == UInt8(ascii: "%"), i + 2 < bytes.count,
            let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2])
        {
            out.append(high << 4 | low)
            i += 2
        } else {
            out.append(c)
        }
        i += 1
    }
    return String(decoding: out, as: UTF8.self)
}

/// An ordered list of form fields, sent as `application/x-www-form-urlencoded`.
///
/// Names may repeat: ``add(_:forName:)`` appends another value (ASIHTTPRequest's
/// `addPostValue`), ``set(_:forName:)`` replaces every value of a name (`setPostValue`).
/// A dictionary literal works too:
///
/// ```swift
/// var form: URLEncodedForm = ["user": "ada", "lang": "en"]
/// form.add("fr", forName: "lang")
/// form.encodedString  // "user=ada&lang=en&lang=fr"
/// request.requestBody = .form(form)
/// ```
public struct URLEncodedForm: Sendable, Hashable, ExpressibleByDictionaryLiteral,
    CustomStringConvertible, Encodable
{
    /// One name/value pair.
    public struct Field: Sendable, Hashable {
        /// The field's name, unencoded.
        public var name: String
        /// The field's value, unencoded.
        public var value: String

        /// Creates a field.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The fields, in the order they are sent.
    public var fields: [Field]

    /// Creates a form from fields, in order.
    ///
    /// - Parameter fields: The fields; names may repeat.
    public init(_ fields: [Field] = []) {
        self.fields = fields
    }

    /// Creates a form from name/value pairs, in order.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.fields = elements.map { Field(name: $0.0, value: $0.1) }
    }

    /// Parses an encoded form or query string (`a=1&b=2`); a leading `?` is skipped.
    ///
    /// - Parameter encoded: The encoded text.
    public init(encoded: String) {
        var text = Substring(encoded)
        if text.hasPrefix("?") { text = text.dropFirst() }
        fields = text.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return Field(
                name: urlDecode(String(parts[0])),
                value: parts.count > 1 ? urlDecode(String(parts[1])) : "")
        }
    }

    /// True when the form has no field.
    public var isEmpty: Bool { fields.isEmpty }

    /// Appends a value for a name, keeping the values it already has.
    ///
    /// - Parameters:
    ///   - value: The value to append.
    ///   - name: The field's name.
    public mutating func add(_ value: String, forName name: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Sets the value of a name: the first field of that name takes it and any later ones go;
    /// a new name is appended.
    ///
    /// - Parameters:
    ///   - value: The new value.
    ///   - name: The field's name.
    public mutating func set(_ value: String, forName name: String) {
        guard let first = fields.firstIndex(where: { $0.name == name }) else {
            fields.append(Field(name: name, value: value))
            return
        }
        fields[first].value = value
        var index = fields.index(after: first)
        while index < fields.endIndex {
            if fields[index].name == name {
                fields.remove(at: index)
            } else {
                index = fields.index(after: index)
            }
        }
    }

    /// Removes every field with this name.
    public mutating func removeAll(named name: String) {
        fields.removeAll { $0.name == name }
    }

    /// The values of a name, in order.
    public func values(forName name: String) -> [String] {
        fields.filter { $0.name == name }.map(\.value)
    }

    /// The first value of a name, or `nil`; setting it works like ``set(_:forName:)``, and
    /// setting `nil` removes the name.
    public subscript(name: String) -> String? {
        get { fields.first { $0.name == name }?.value }
        set {
            if let newValue { set(newValue, forName: name) } else { removeAll(named: name) }
        }
    }

    /// The form encoded: `name=value` pairs joined by `&`, each side passed through
    /// ``urlEncode(_:)``.
    public var encodedString: String {
        fields.map { urlEncode($0.name) + "=" + urlEncode($0.value) }.joined(separator: "&")
    }

    /// ``encodedString`` as bytes, ready to send.
    public var encodedData: Data { Data(encodedString.utf8) }

    public var description: String { encodedString }

    /// Encodes as an object of arrays of values per name (`{"lang": ["en", "fr"]}`); the
    /// URL-encoding serializer uses the fields directly and keeps their order.
    public func encode(to encoder: any Encoder) throws {
        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
        var container = encoder.container(keyedBy: Key.self)
        var seen = Set<String>()
        for field in fields where seen.insert(field.name).inserted {
            try container.encode(values(forName: field.name), forKey: Key(stringValue: field.name))
        }
    }
}
