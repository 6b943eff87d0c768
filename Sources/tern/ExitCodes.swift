// curl's exit codes for Tern's errors, so scripts written for curl keep working.

import Tern

enum ExitCodes {
    /// The curl exit code for a failed request.
    static func curl(for error: TernError) -> Int32 {
        switch error.code {
        case .badURL: return 3  // URL malformed
        case .unsupported: return 4  // a feature not built in
        case .resolveFailed: return 6  // couldn't resolve host
        case .connectionRefused, .connectFailed: return 7  // couldn't connect
        case .protocolError: return 8  // weird server reply
        case .headersTooLarge: return 56  // curl: "Too large response headers" (recv error)
        case .partialBody: return 18  // partial file
        case .fileWriteFailed: return 23  // write error
        case .fileReadFailed: return 26  // read error
        case .outOfMemory: return 27
        case .connectTimedOut, .headersTimedOut, .bodyTimedOut, .totalTimedOut: return 28
        case .rangeNotSatisfiable: return 33  // range error
        case .tlsHandshakeFailed: return 35  // SSL connect error
        case .cancelled, .callbackAborted, .shutDown: return 42  // aborted by callback
        case .invalidArgument, .badHeader, .busy: return 43  // bad function argument
        case .emptyReply: return 52  // got nothing
        case .connectionReset, .ioError, .badChunkedEncoding: return 56  // receive failure
        case .tlsClientCertificateRequired, .tlsCertificateFileError: return 58  // local cert
        case .tlsCAFileError: return 77  // CA cert
        case .badContentEncoding, .decodeLimitExceeded: return 61  // bad content encoding
        case .tooManyRedirects: return 47  // too many redirects
        case .redirectRefused: return 3  // a Location curl cannot parse: URL malformed
        case .authenticationFailed: return 67  // login denied
        case .proxyError where error.message.contains("PAC script"):
            return 5  // the proxy could not be worked out: curl's "couldn't resolve proxy"
        case .proxyError:
            // curl: a refused CONNECT is a receive failure (56); a SOCKS handshake that fails
            // is CURLE_PROXY (97). The engine's SOCKS messages all say "SOCKS".
            return error.message.contains("SOCKS") ? 97 : 56
        default:
            return error.isTLSVerificationFailure ? 60 : 2
        }
    }
}
