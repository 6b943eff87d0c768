// The rarely set settings live in one shared copy-on-write box (Request.OptionsBox): these
// tests check that sharing never leaks a change from one request, or from a later change, into
// another request or a plan already made, and that a plan of all defaults (the fast path)
// equals the plan of the same settings spelled out (the general path). No sockets.

import Foundation
import HTTPTypes
import Testing
@testable import Tern

extension TernTests {
    @Suite struct Options {
        func plan(_ request: Request) -> Plan {
            request.storage.withLock { Plan(settings: $0.settings, requestID: request.id) }
        }

        func hasDefaultOptions(_ request: Request) -> Bool {
            request.storage.withLock { $0.settings.hasDefaultOptions }
        }

        @Test func newRequestsShareTheDefaultsUntilOneChanges() {
            let a = Request(url: URL(string: "http://example.com/a")!)
            let b = Request(url: URL(string: "http://example.com/b")!)
            #expect(hasDefaultOptions(a) && hasDefaultOptions(b))
            a.timeouts.connect = 5
            a.userAgent = "A/1"
            #expect(!hasDefaultOptions(a))
            #expect(hasDefaultOptions(b))
            #expect(b.timeouts.connect == 30)
            #expect(b.userAgent == nil)
            #expect(Request(url: URL(string: "http://example.com/c")!).timeouts.connect == 30)
            #expect(a.timeouts.connect == 5 && a.userAgent == "A/1")
            // The hot settings never leave the defaults.
            a.callbackQueue = .main
            b.callbackQueue = .main
            #expect(hasDefaultOptions(b))
        }

        @Test func aPlanKeepsTheOptionsItWasMadeFrom() {
            let request = Request(url: URL(string: "http://example.com/")!)
            request.maxRetries = 2
            let before = plan(request)
            request.maxRetries = 7
            request.downloadFile = "/tmp/never-written"
            #expect(before.policy.maxRetries == 2)
            #expect(before.download == nil)
            let after = plan(request)
            #expect(after.policy.maxRetries == 7)
            #expect(after.download?.path == "/tmp/never-written")
            // A plan of the defaults does not see a change made after it either.
            let fresh = Request(url: URL(string: "http://example.com/")!)
            let defaults = plan(fresh)
            fresh.persistent = false
            #expect(defaults.persistent)
            #expect(defaults.hasDefaultOptions)
            #expect(!plan(fresh).persistent)
        }

        @Test func theDefaultsPlanAsTheSameSettingsSpelledOut() {
            let url = URL(string: "http://user:secret@example.com:8080/path?q=1#frag")!
            func configured(_ spellOut: Bool) -> Request {
                let request = Request(url: url, method: .delete)
                request.headerFields[HTTPField.Name("X-One")!] = "1"
                request.headerFields[.cookie] = "a=1"
                request.headerFields[.cookie] = "a=1, b=2"
                if spellOut {
                    // Each setting set to the value it already has: the box is the request's own.
                    request.timeouts = Request.Timeouts()
                    request.persistent = true
                    request.maxRetries = 0
                    request.maxRedirects = 20
                    request.progressInterval = 0.1
                }
                return request
            }
            let fast = plan(configured(false))
            let general = plan(configured(true))
            #expect(fast.hasDefaultOptions)
            #expect(!general.hasDefaultOptions)
            for p in [fast, general] {
                #expect(p.setupError == nil)
                #expect(p.urlString == "http://example.com:8080/path?q=1")
                #expect(p.method == "DELETE")
                #expect(p.idempotent)
                #expect(p.credential?.user == "user")
                #expect(p.credential?.password == "secret")
                #expect(p.proxy == nil)
                #expect(p.download == nil)
                #expect(p.cache == nil)
                #expect(p.maxRedirects == 20)
                #expect(p.progressInterval == 0.1)
                if case .none = p.body {} else { Issue.record("a body without one set") }
            }
            #expect(fast.headers.map(\.name) == general.headers.map(\.name))
            #expect(fast.headers.map(\.value) == general.headers.map(\.value))
            #expect(fast.manualCookie == general.manualCookie)
            #expect(fast.manualCookie != nil)
            #expect(fast.policy.maxRetries == general.policy.maxRetries)
            #expect(fast.policy.maxRetryDelay == general.policy.maxRetryDelay)
            #expect(fast.policy.totalTimeout == general.policy.totalTimeout)
            #expect(fast.policy.coalesceBytes == general.policy.coalesceBytes)
        }

        @Test func setupErrorsComeFromBothPaths() {
            let fast = Request(url: URL(string: "http://example.com/")!)
            fast.setHeader("Bad Name", "x")
            #expect(plan(fast).setupError?.code == .badHeader)
            let general = Request(url: URL(string: "http://example.com/")!)
            general.setHeader("Bad Name", "x")
            general.body = Data("x".utf8)
            general.bodyFile = "/dev/null"
            // The first problem found wins: the field comes before the bodies, as it did
            // before the options had a box.
            #expect(plan(general).setupError?.code == .badHeader)
            let bodies = Request(url: URL(string: "http://example.com/")!)
            bodies.body = Data("x".utf8)
            bodies.bodyFile = "/dev/null"
            #expect(plan(bodies).setupError?.code == .invalidArgument)
        }
    }
}
