// Mesibo's signed file transfer with Tern: upload a file to a file server, then download it
// again through its signed URL, and check the copy.
//
//     filetransfer UPLOAD_URL UID ACCESS_TOKEN FILE
//
// scripts/test.sh runs it against Tern's reference file server (Tests/TestServer/fileserver.py,
// user 123 with the token "token"); it exits 1 when a step fails. The region between the README
// markers is copied verbatim into README.md (scripts/check-readme.sh).

import Foundation
import Tern

let args = CommandLine.arguments
guard args.count == 5, let uploadURL = URL(string: args[1]) else {
    FileHandle.standardError.write(Data("usage: filetransfer UPLOAD_URL UID ACCESS_TOKEN FILE\n".utf8))
    exit(2)
}
let (uid, token, file) = (args[2], args[3], args[4])
let state = NSTemporaryDirectory() + "filetransfer-example-\(getpid())"
var ok = false
do {
    // README: begin
    let files = FileTransferManager(configuration: .init(
        uploadURL: uploadURL, uid: uid, accessToken: token,  // the token signs, never travels
        stateFolder: state))  // where each server's max_file_size is remembered
    files.onProgress = { transfer, percent in  // on the configuration's callbackQueue
        print(transfer.isUpload ? "upload" : "download", "\(percent)%")
    }
    // A multipart POST streamed from disk: v, op, uid, device, ts, signed, sig and the file.
    let upload = files.upload(file: file, options: .init(priority: .high, signed: true))
    guard let url = try await upload.result() else { exit(1) }  // the server's JSON "url"
    print("stored at \(url), max_file_size \(files.maxFileSize(for: uploadURL) ?? 0)")
    // GET url?v=1&uid=…&ts=…&sig=…, into a file, resuming an interrupted one.
    try await files.download(url: url, to: file + ".copy").result()
    // README: end
    ok = try Data(contentsOf: URL(fileURLWithPath: file))
        == Data(contentsOf: URL(fileURLWithPath: file + ".copy"))
    print(ok ? "the copy is identical" : "filetransfer: the copy differs")
} catch {
    print("filetransfer: \(error)")
}
try? FileManager.default.removeItem(atPath: file + ".copy")
try? FileManager.default.removeItem(atPath: state)
exit(ok ? 0 : 1)
