// -w/--write-out: curl's format variables for what Tern knows after a transfer.

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import Tern

enum WriteOut {
    /// Expands `format` (or the file named by `@FILE`, `@-` for stdin) and writes it to
    /// stdout; `%{stderr}` and `%{stdout}` switch the destination as in curl.
    static func print(
        _ format: String, request: Request, url: String, outputPath: String?, exitCode: Int32,
        errorMessage: String
    ) {
        var template = format
        if format.hasPrefix("@") {
            let path = String(format.dropFirst())
            let data = path == "-"
                ? readStandardInput()
                : FileManager.default.contents(atPath: path) ?? Data()
            template = String(decoding: data, as: UTF8.self)
        }
        let timings = request.timings
        func seconds(_ value: TimeInterval?) -> String { formatted("%.6f", value ?? 0) }
        let total = timings?.total ?? 0
        let received = request.bytesReceived
        // A CONNECT the proxy refused: its status is curl's http_connect, and no response
        // came from the server.
        let refusedTunnel = request.error?.code == .proxyError
        let code = refusedTunnel ? 0 : request.statusCode
        let variables: [String: String] = [
            "http_code": formatted("%03ld", code),
            "response_code": formatted("%03ld", code),
            "http_connect": formatted(
                "%03ld", refusedTunnel ? request.statusCode : request.proxyConnectStatusCode),
            "size_download": "\(received)",
            "size_upload": "\(request.progress.bytesSent)",
            "size_header": "\(request.statusCode == 0 ? 0 : CommandRunner.headText(request).utf8.count)",
            "time_total": seconds(total),
            "time_connect": seconds(timings?.connected),
            "time_pretransfer": seconds(timings?.connected),
            "time_starttransfer": seconds(timings?.headers),
            "time_namelookup": seconds(0),
            "speed_download": formatted("%.0f", total > 0 ? Double(received) / total : 0),
            "url_effective": request.effectiveURL?.absoluteString ?? url,
            "num_redirects": "\(request.redirectCount)",
            "redirect_url": redirectURL(request),
            "url": url,
            "content_type": request.responseHeaders[.contentType] ?? "",
            "http_version": httpVersion(request.responseHTTPVersion),
            "num_connects": request.statusCode == 0 || request.isReused || request.attempts == 0 ? "0" : "1",
            "filename_effective": outputPath ?? "",
            "exitcode": "\(exitCode)",
            "errormsg": errorMessage,
            "method": request.headOnly ? "HEAD" : request.method.rawValue,
            "scheme": URL(string: url)?.scheme?.uppercased() ?? "",
        ]
        var fd: Int32 = 1
        var out = ""
        var chars = Substring(template)
        func flush() {
            _ = Output.writeAll(fd, Data(out.utf8))
            out = ""
        }
        while let c = chars.first {
            chars = chars.dropFirst()
            if c == "\\", let next = chars.first {
                chars = chars.dropFirst()
                switch next {
                case "n": out += "\n"
                case "r": out += "\r"
                case "t": out += "\t"
                case "\\": out += "\\"
                default: out += "\\\(next)"
                }
            } else if c == "%", chars.first == "%" {
                chars = chars.dropFirst()
                out += "%"
            } else if c == "%", chars.hasPrefix("{"), let close = chars.firstIndex(of: "}") {
                let name = String(chars[chars.index(after: chars.startIndex)..<close])
                chars = chars[chars.index(after: close)...]
                switch name {
                case "stdout": flush(); fd = 1
                case "stderr": flush(); fd = 2
                default:
                    if let value = variables[name] {
                        out += value
                    } else {
                        Output.stderr("tern: unknown --write-out variable: '\(name)'\n")
                    }
                }
            } else if c == "%", chars.hasPrefix("header{"), let close = chars.firstIndex(of: "}") {
                let name = String(chars[chars.index(chars.startIndex, offsetBy: 7)..<close])
                chars = chars[chars.index(after: close)...]
                if let fieldName = HTTPField.Name(name) {
                    out += request.responseHeaders[fieldName] ?? ""
                }
            } else {
                out.append(c)
            }
        }
        flush()
    }

    /// curl's `%{http_version}`: `1.0`, `1.1` or `2`, and `0` when no response came.
    static func httpVersion(_ version: Response.HTTPVersion?) -> String {
        guard let version else { return "0" }
        return version.major >= 2 && version.minor == 0
            ? "\(version.major)" : "\(version.major).\(version.minor)"
    }

    /// Where a 3xx that was not followed points, resolved against the URL it came from (curl's
    /// `%{redirect_url}`); empty otherwise.
    static func redirectURL(_ request: Request) -> String {
        guard (300..<400).contains(request.statusCode),
            let location = request.responseHeaders[.location], !location.isEmpty
        else { return "" }
        let base = request.effectiveURL ?? request.url
        return URL(string: location, relativeTo: base)?.absoluteString ?? location
    }
}
