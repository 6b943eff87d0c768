// tern-file-transfer-run: one signed upload or download through FileTransferManager, in a
// process of its own, for the tests that measure its memory or kill it with SIGKILL in the
// middle of a download. Not a product.
//
//   tern-file-transfer-run upload   UPLOAD_URL UID TOKEN FILE        prints "url URL"
//   tern-file-transfer-run download UPLOAD_URL UID TOKEN URL DEST    prints "progress N" lines
//
// Both print "peak_rss_kib N" (VmHWM) at the end. Exit status 0, or 1 when the transfer failed
// ("error ..." says why). $TERN_FT_STATE names the manager's state folder (where each server's
// max_file_size is remembered), so that two runs show what survives a restart.

import FoundationEssentials
import Tern

#if canImport(Glibc)
import Glibc
#endif

func peakRSSKiB() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else {
        return -1
    }
    for line in text.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
            ?? -1
    }
    return -1
}

func say(_ text: String) {
    print(text)
    fflush(nil)  // every stream: the tests read lines as they come
}

let args = CommandLine.arguments
guard args.count >= 6, let uploadURL = URL(string: args[2]),
    (args[1] == "upload" && args.count == 6) || (args[1] == "download" && args.count == 7)
else {
    say("usage: tern-file-transfer-run upload|download UPLOAD_URL UID TOKEN FILE | URL DEST")
    exit(2)
}
let stateFolder = getenv("TERN_FT_STATE").map { String(cString: $0) }
let manager = FileTransferManager(
    configuration: .init(uploadURL: uploadURL, uid: args[3], accessToken: args[4], stateFolder: stateFolder))
manager.onProgress = { _, percent in say("progress \(percent)") }
var status: Int32 = 0
do {
    if args[1] == "upload" {
        let url = try await manager.upload(file: args[5]).result()
        say("url \(url?.absoluteString ?? "-")")
    } else {
        guard let url = URL(string: args[5]) else { exit(2) }
        try await manager.download(url: url, to: args[6]).result()
        say("done")
    }
} catch {
    say("error \(error)")
    status = 1
}
say("peak_rss_kib \(peakRSSKiB())")
exit(status)
