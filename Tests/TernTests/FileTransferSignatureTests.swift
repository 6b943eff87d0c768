// FileTransferSignature: the values equal sha256sum of the joined strings (computed here by
// running sha256sum), and verification refuses replayed, tampered and missing signatures.

import Foundation
@testable import Tern
import Testing

@Suite struct FileTransferSignatureTests {
    static let uid = "123"
    static let ts: Int64 = 1770223138
    static let token = "token"
    static let url = "https://files.example.com/u/abc.jpg"

    /// `printf '%s' text | sha256sum`, run as a process.
    static func sha256sum(_ text: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sha256sum"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(Data(text.utf8))
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).split(separator: " ").first.map(String.init)
            ?? ""
    }

    @Test func valuesMatchSha256sum() throws {
        let upload = FileTransferSignature.upload(
            uid: Self.uid, timestamp: Self.ts, accessToken: Self.token)
        #expect(upload == (try Self.sha256sum("123-1770223138-token")))
        #expect(upload == "48d1f3cafa661a55b5e1abbc170b1b041b61ab273d9aa457e1caad47f3ac0307")
        let download = FileTransferSignature.download(
            url: Self.url + "?v=1&uid=123", uid: Self.uid, timestamp: Self.ts,
            accessToken: Self.token)
        #expect(download == (try Self.sha256sum(Self.url + "-123-1770223138-token")))
        #expect(download == "0cc00ebd0f38c4183ece9a4b1c1fa251dca19777a243158f7c46ab206bbb38c0")
        #expect(
            FileTransferSignature.downloadQuery(
                url: Self.url, uid: Self.uid, timestamp: Self.ts, accessToken: Self.token)
                == "v=1&uid=123&ts=1770223138&sig=\(download!)")
        #expect(FileTransferSignature.upload(uid: "", timestamp: 1, accessToken: "t") == nil)
        #expect(FileTransferSignature.download(url: "", uid: "1", timestamp: 1, accessToken: "t") == nil)
    }

    @Test func verifyAcceptsWithinTheWindowAndRefusesTheRest() throws {
        let sig = FileTransferSignature.upload(
            uid: Self.uid, timestamp: Self.ts, accessToken: Self.token)!
        func check(
            url: String? = nil, uid: String = Self.uid, ts: Int64 = Self.ts, token: String? = Self.token,
            sig: String?, now: Int64 = Self.ts, window: Int64 = FileTransferSignature.defaultWindow
        ) -> FileTransferSignature.Verification {
            FileTransferSignature.verify(
                url: url, uid: uid, timestamp: ts, accessToken: token, signature: sig, now: now,
                window: window)
        }
        #expect(check(sig: sig) == .valid)
        #expect(check(sig: sig, now: Self.ts + 299) == .valid)
        #expect(check(sig: sig.uppercased()) == .valid)
        // Replayed ten minutes later; accepted under a wider window.
        #expect(check(sig: sig, now: Self.ts + 600) == .expired)
        #expect(check(sig: sig, now: Self.ts + 600, window: 3600) == .valid)
        // Tampered.
        #expect(check(uid: "124", sig: sig) == .mismatch)
        #expect(check(ts: Self.ts + 1, sig: sig) == .mismatch)
        #expect(check(token: "other", sig: sig) == .mismatch)
        #expect(check(sig: String(sig.dropLast()) + (sig.last == "0" ? "1" : "0")) == .mismatch)
        #expect(check(url: Self.url, sig: sig) == .mismatch)
        // Missing.
        #expect(check(sig: nil) == .missing)
        #expect(check(sig: "") == .missing)
        #expect(check(token: nil, sig: sig) == .missing)
        // A download signature checks against its URL, with or without the query.
        let dsig = FileTransferSignature.download(
            url: Self.url, uid: Self.uid, timestamp: Self.ts, accessToken: Self.token)!
        #expect(check(url: Self.url + "?v=1&sig=x", sig: dsig) == .valid)
        #expect(check(url: Self.url + "2", sig: dsig) == .mismatch)
        // The current clock when no `now` is given: a fresh signature passes, an old one not.
        let now = Int64(Date().timeIntervalSince1970)
        let fresh = FileTransferSignature.upload(uid: "7", timestamp: now, accessToken: "t")!
        #expect(
            FileTransferSignature.verify(uid: "7", timestamp: now, accessToken: "t", signature: fresh)
                == .valid)
        let old = FileTransferSignature.upload(uid: "7", timestamp: now - 600, accessToken: "t")!
        #expect(
            FileTransferSignature.verify(
                uid: "7", timestamp: now - 600, accessToken: "t", signature: old) == .expired)
    }
}
