// The README's Swift example, kept runnable: the snippet between the markers is copied there.

import Foundation
import Testing
import Tern

extension TernTests {
    @Suite struct ReadmeExample {
        @Test func swiftExample() async throws {
            let servers = try Servers.get()
            let url = servers.nginx("/64k.txt")
            // README: begin
            let request = Request(url: url)
            request.listener = { request, state, percent in  // on request.callbackQueue
                print("\(state) \(percent)%")  // upload/download, 0...100, -1 on error
                return true  // false cancels
            }
            let response = try await request.response()  // cancelling the task cancels it
            print(response.statusCode, response.data.count, response.string?.prefix(20) ?? "")
            // README: end
            #expect(response.statusCode == 200)
            #expect(response.data.count == 65536)
        }
    }
}
