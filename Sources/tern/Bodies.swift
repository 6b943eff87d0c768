// Request bodies from curl's flags: -d/--data, --data-binary, --data-raw, --data-urlencode
// (joined with & in command-line order), -F/--form and --form-string (multipart/form-data
// streamed from disk), and -E's CERT[:PASSWORD] syntax.

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Tern

/// One body option, in command-line order.
struct DataItem {
    enum Kind {
        /// -d/--data: `@FILE` reads a file without its CR and LF bytes.
        case data
        /// --data-binary: `@FILE` verbatim.
        case binary
        /// --data-raw: no `@` handling.
        case raw
        /// --data-urlencode: `CONTENT`, `=CONTENT`, `NAME=CONTENT`, `@FILE`, `NAME@FILE`.
        case urlencode
    }

    var kind: Kind
    var value: String
}

/// A body option that cannot be used: curl's exit code and message.
struct BodyFailure: Error {
    var code: Int32
    var message: String
}

enum Bodies {
    /// The body for the -d family: one `--data-binary @FILE` (not stdin) streams the file;
    /// anything else is read into memory and joined with `&`, as curl does.
    static func data(_ items: [DataItem]) throws(BodyFailure) -> RequestBody {
        if items.count == 1, let only = items.first, only.kind == .binary,
            only.value.hasPrefix("@"), only.value != "@-"
        {
            let path = String(only.value.dropFirst())
            guard FileManager.default.isReadableFile(atPath: path) else { throw unreadable(path) }
            return .file(path)  // streamed, never loaded whole
        }
        var parts: [Data] = []
        for item in items {
            switch item.kind {
            case .raw:
                parts.append(Data(item.value.utf8))
            case .data:
                if item.value.hasPrefix("@") {
                    var bytes = try read(String(item.value.dropFirst()))
                    bytes.removeAll { $0 == 0x0A || $0 == 0x0D }
                    parts.append(bytes)
                } else {
                    parts.append(Data(item.value.utf8))
                }
            case .binary:
                parts.append(
                    item.value.hasPrefix("@")
                        ? try read(String(item.value.dropFirst())) : Data(item.value.utf8))
            case .urlencode:
                parts.append(Data(try urlencodeItem(item.value).utf8))
            }
        }
        return .data(Data(parts.joined(separator: Data("&".utf8))))
    }

    /// One --data-urlencode value, curl's way: the name (before `=` or `@`) is sent as it is,
    /// the content encoded.
    static func urlencodeItem(_ value: String) throws(BodyFailure) -> String {
        guard let mark = value.firstIndex(where: { $0 == "=" || $0 == "@" }) else {
            return curlEscape(Data(value.utf8))
        }
        let name = String(value[..<mark])
        let rest = String(value[value.index(after: mark)...])
        let content = value[mark] == "@" ? try read(rest) : Data(rest.utf8)
        let encoded = curlEscape(content)
        return name.isEmpty ? encoded : name + "=" + encoded
    }

    /// curl's escaping for --data-urlencode: letters, digits and `-._~` stay, a space becomes
    /// `+`, every other byte `%XX`.
    static func curlEscape(_ bytes: Data) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count)
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            case UInt8(ascii: " "):
                out.append(UInt8(ascii: "+"))
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A multipart form from -F and --form-string values, in order (`literal` marks
    /// --form-string values).
    static func multipart(_ specs: [(value: String, literal: Bool)]) throws(BodyFailure)
        -> MultipartForm
    {
        var form = MultipartForm()
        for spec in specs {
            form.append(try part(spec.value, literal: spec.literal))
        }
        return form
    }

    /// One -F value: `NAME=VALUE`, `NAME=@FILE`, `NAME=<FILE`, each with optional
    /// `;type=TYPE` and `;filename=NAME` (values may be "double-quoted").
    static func part(_ spec: String, literal: Bool) throws(BodyFailure) -> MultipartForm.Part {
        guard let eq = spec.firstIndex(of: "="), eq != spec.startIndex else {
            throw BodyFailure(code: 2, message: "Illegally formatted input field: \"\(spec)\"")
        }
        let name = String(spec[..<eq])
        let content = spec[spec.index(after: eq)...]
        if literal { return .field(name, value: String(content)) }

        let lead = content.first
        let isFile = lead == "@" || lead == "<"
        let body = isFile ? content.dropFirst() : content
        var (word, rest) = firstWord(body, plain: !isFile)
        var type: String?
        var fileName: String?
        while let semicolon = rest.first, semicolon == ";" {
            rest = rest.dropFirst()
            let key = rest.prefix { $0 != "=" && $0 != ";" }.lowercased()
            guard rest.dropFirst(key.count).first == "=" else { break }
            rest = rest.dropFirst(key.count + 1)
            let (value, after) = firstWord(rest, plain: false)
            rest = after
            switch key {
            case "type": type = value
            case "filename": fileName = value
            default: break  // headers=, encoder=: not supported, ignored as curl's older builds do
            }
        }
        if !isFile, !rest.isEmpty { word += String(rest) }  // a ';' that starts no parameter

        switch lead {
        case "@":
            if word == "-" {
                let data = readStandardInput()
                return .data(data, name: name, fileName: fileName ?? "-", contentType: type)
            }
            guard FileManager.default.isReadableFile(atPath: word) else { throw unreadable(word) }
            return .file(word, name: name, fileName: fileName, contentType: type)
        case "<":
            if word == "-" {
                let data = readStandardInput()
                return .data(data, name: name, fileName: fileName, contentType: type)
            }
            guard FileManager.default.isReadableFile(atPath: word) else { throw unreadable(word) }
            if let fileName {
                return .file(word, name: name, fileName: fileName, contentType: type)
            }
            return .field(name, contentsOf: word, contentType: type)
        default:
            var part = MultipartForm.Part.field(name, value: word)
            part.contentType = type
            part.fileName = fileName
            return part
        }
    }

    /// The first word of a -F value: a "quoted string" (with \" and \\ escapes), else the text
    /// up to the next `;` (for a plain value: up to the next `;type=`, `;filename=`,
    /// `;headers=` or `;encoder=`, so that other semicolons stay in the value).
    private static func firstWord(_ text: Substring, plain: Bool) -> (String, Substring) {
        if text.first == "\"" {
            var out = ""
            var rest = text.dropFirst()
            while let c = rest.first {
                rest = rest.dropFirst()
                if c == "\\", let next = rest.first, next == "\"" || next == "\\" {
                    out.append(next)
                    rest = rest.dropFirst()
                } else if c == "\"" {
                    break
                } else {
                    out.append(c)
                }
            }
            return (out, rest)
        }
        if plain {
            let lower = text.lowercased()
            var cut = text.endIndex
            for key in [";type=", ";filename=", ";headers=", ";encoder="] {
                if let range = lower.firstRange(of: key) {
                    let offset = lower.distance(from: lower.startIndex, to: range.lowerBound)
                    let index = text.index(text.startIndex, offsetBy: offset)
                    if index < cut { cut = index }
                }
            }
            return (String(text[..<cut]), text[cut...])
        }
        let end = text.firstIndex(of: ";") ?? text.endIndex
        return (String(text[..<end]), text[end...])
    }

    /// -E's `CERT[:PASSWORD]`: the first colon not escaped with a backslash splits them;
    /// `\:` and `\\` stand for `:` and `\`.
    static func certificate(_ text: String) -> (path: String, password: String?) {
        var path = ""
        var chars = Substring(text)
        while let c = chars.first {
            chars = chars.dropFirst()
            if c == "\\", let next = chars.first, next == ":" || next == "\\" {
                path.append(next)
                chars = chars.dropFirst()
            } else if c == ":" {
                return (path, String(chars))
            } else {
                path.append(c)
            }
        }
        return (path, nil)
    }

    /// A file's bytes, stdin for `-`.
    private static func read(_ path: String) throws(BodyFailure) -> Data {
        if path == "-" { return readStandardInput() }
        guard let data = FileManager.default.contents(atPath: path) else { throw unreadable(path) }
        return data
    }

    static func unreadable(_ path: String) -> BodyFailure {
        BodyFailure(code: 26, message: "Failed to open/read local data from file/application \(path)")
    }
}
