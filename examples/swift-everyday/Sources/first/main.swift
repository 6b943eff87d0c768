// A first program with Tern: `first URL` prints the status and size of the response, or what
// went wrong, and exits 1 on failure. The README shows this file from "import" to the end.

// README: begin
import Foundation
import Tern

let address = CommandLine.arguments.dropFirst().first ?? "http://example.com/"
guard let request = Request(string: address) else {  // nil unless an absolute http(s) URL
    print("not an http(s) URL: \(address)")
    exit(1)
}
request.setHeader("Accept", "text/plain")
do {
    let response = try await request.response()
    print(response.statusCode, response.data.count, "bytes", response.contentType ?? "")
} catch {
    print(error.localizedDescription)  // what failed, the host and the phase
    exit(1)
}
// README: end
