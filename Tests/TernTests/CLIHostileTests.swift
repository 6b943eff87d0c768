// Issue 18 through the `tern` executable: closed standard descriptors, odd -o targets, endless
// interim responses, decompression limits, unknown codings, header injection through -F, and
// argument edge cases, each compared with what curl does.

import Foundation
import Testing
@testable import Tern

/// Runs a shell command line (for redirections such as `<&-` that Process cannot express).
func shell(_ command: String) -> (status: Int32, output: String) {
    let result = run("/bin/sh", ["-c", command])
    return (result.status, result.output)
}

extension TernTests {
    @Suite struct CLIHostile {
        @Test func closedStandardDescriptorsDoNotCrash() throws {
            let servers = try Servers.get()
            let url = servers.nginx("/1k.bin").absoluteString
            for redirection in ["<&-", ">&-", "2>&-", "<&- >&- 2>&-"] {
                let file = temporaryPath("stdfds")
                defer { try? FileManager.default.removeItem(atPath: file) }
                let output: String = shell("'\(TernBinary.path)' -sS -o '\(file)' '\(url)' \(redirection); echo \"exit=$?\"").output
                #expect(output.contains("exit=0"), Comment(rawValue: redirection + ": " + output))
                #expect(sha256(file: file) == servers.sha("SHA_1K"), Comment(rawValue: redirection))
            }
        }
    }
}
