// Credentials: protection spaces, the session and file stores (lookup, most recent per origin,
// mode 0600, crash-safe rewrite, round trip), and the per-request coordinator that answers the
// engine's auth callback from the stores and the challenge handler.

import Foundation
import Testing

@testable import Tern

extension TernTests {
    @Suite struct CredentialsTests {
        let alice = Credential(user: "alice", password: "wonderland")
        let bob = Credential(user: "bob", password: "p@ss:w0rd%", persistence: .permanent)

        func space(
            _ address: String, realm: String? = nil, proxy: Bool = false,
            scheme: AuthenticationScheme? = nil
        ) -> ProtectionSpace {
            ProtectionSpace(
                url: URL(string: address)!, realm: realm, isProxy: proxy,
                authenticationScheme: scheme)!
        }

        // MARK: Values

        @Test func protectionSpaceFromURL() {
            let s = space("HTTP://User@WWW.Example.COM/path?q", realm: "R")
            #expect(s.scheme == "http")
            #expect(s.host == "www.example.com")
            #expect(s.port == 80)
            #expect(s.realm == "R")
            #expect(space("https://example.com").port == 443)
            #expect(space("http://[::1]:8080/").host == "::1")
            #expect(space("http://[::1]:8080/").description == "http://[::1]:8080")
            #expect(ProtectionSpace(url: URL(string: "ftp://example.com/")!) == nil)
            #expect(ProtectionSpace(url: URL(fileURLWithPath: "/tmp")) == nil)
            #expect(
                space("http://p:3128", realm: "squid", proxy: true, scheme: .digest).description
                    == "http://p:3128 realm \"squid\" Digest (proxy)")
            #expect(AuthenticationScheme(rawValue: "DIGEST") == .digest)
            #expect(AuthenticationScheme(rawValue: "basic").rawValue == "Basic")
        }

        @Test func passwordsNeverPrint() {
            let credential = Credential(user: "alice", password: "s3cret-word")
            #expect(!"\(credential)".contains("s3cret"))
            #expect(!String(reflecting: credential).contains("s3cret"))
            var dumped = ""
            dump(credential, to: &dumped)
            #expect(!dumped.contains("s3cret"))
            #expect(dumped.contains("alice"))
        }

        // MARK: Session store

        @Test func sessionStoreLookup() {
            let store = SessionCredentialStore()
            let realmA = space("http://example.com/", realm: "A")
            store.set(alice, for: realmA)
            #expect(store.credential(for: realmA) == alice)
            #expect(
                store.credential(for: space("http://example.com:80/other", realm: "A")) == alice)
            #expect(store.credential(for: space("http://example.com/", realm: "B")) == nil)
            #expect(store.credential(for: space("http://example.com/")) == nil)
            #expect(store.credential(for: space("https://example.com/", realm: "A")) == nil)
            #expect(store.credential(for: space("http://example.com:81/", realm: "A")) == nil)
            #expect(
                store.credential(for: space("http://example.com/", realm: "A", proxy: true)) == nil)
            #expect(store.credential(for: space("http://www.example.com/", realm: "A")) == nil)

            // A realm-less credential answers any realm of its origin; the realm's own wins.
            store.set(bob, for: space("http://example.com/"))
            #expect(store.credential(for: space("http://example.com/", realm: "B")) == bob)
            #expect(store.credential(for: realmA) == alice)

            // The most recent of the origin, whatever the realm, for preemptive use.
            #expect(
                store.mostRecentCredential(forOriginOf: space("http://example.com/"))?.credential
                    == bob)
            store.set(alice, for: realmA)
            let recent = store.mostRecentCredential(
                forOriginOf: space("http://example.com/", realm: "zzz"))
            #expect(recent?.credential == alice)
            #expect(recent?.space.realm == "A")
            #expect(store.mostRecentCredential(forOriginOf: space("http://other.example/")) == nil)

            #expect(store.allCredentials.count == 2)
            store.removeCredential(for: realmA)
            #expect(store.credential(for: realmA) == bob)  // the realm-less one now
            store.removeAll()
            #expect(store.allCredentials.isEmpty)
        }

        // MARK: File store

        @Test func fileStoreRoundTripAndMode() throws {
            let dir = temporaryPath("credentials-dir")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let file = URL(fileURLWithPath: dir + "/sub/credentials.json")
            let store = try FileCredentialStore(fileURL: file)
            #expect(store.allCredentials.isEmpty)
            #expect(!FileManager.default.fileExists(atPath: file.path))

            let proxySpace = space(
                "http://proxy.example:3128", realm: "squid", proxy: true, scheme: .basic)
            store.set(alice, for: space("https://example.com", realm: "staff", scheme: .digest))
            store.set(bob, for: proxySpace)
            store.set(alice, for: space("http://[::1]:9"))
            try store.synchronize()

            let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
            #expect(attributes[.posixPermissions] as? Int == 0o600)
            let dirMode =
                try FileManager.default.attributesOfItem(atPath: dir + "/sub")[.posixPermissions]
                as? Int
            #expect(dirMode == 0o700)
            let text = try String(contentsOf: file, encoding: .utf8)
            #expect(text.contains("\"format\" : \"tern-credentials\""))
            #expect(text.contains("p@ss:w0rd%"))

            let reopened = try FileCredentialStore(fileURL: file)
            #expect(reopened.allCredentials == store.allCredentials)
            #expect(reopened.credential(for: proxySpace) == bob)
            #expect(reopened.allCredentials.keys.contains(proxySpace))  // scheme kept
            // The order of storage survives: the most recent of an origin is still the same.
            store.set(bob, for: space("https://example.com", realm: "other"))
            store.set(alice, for: space("https://example.com", realm: "third"))
            try store.synchronize()
            let again = try FileCredentialStore(fileURL: file)
            #expect(
                again.mostRecentCredential(forOriginOf: space("https://example.com"))?.space.realm
                    == "third")

            again.removeCredential(for: proxySpace)
            try again.synchronize()
            #expect(try FileCredentialStore(fileURL: file).credential(for: proxySpace) == nil)
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir + "/sub")
            #expect(leftovers == ["credentials.json"])
        }

        @Test func fileStoreErrors() throws {
            let path = temporaryPath("credentials.json")
            defer { try? FileManager.default.removeItem(atPath: path) }
            try Data("{}".utf8).write(to: URL(fileURLWithPath: path))
            #expect(throws: TernError.fileReadFailed) {
                try FileCredentialStore(fileURL: URL(fileURLWithPath: path))
            }
            try Data(#"{"format":"tern-credentials","version":7,"credentials":[]}"#.utf8).write(
                to: URL(fileURLWithPath: path))
            #expect(throws: TernError.fileReadFailed) {
                try FileCredentialStore(fileURL: URL(fileURLWithPath: path))
            }

            // A file whose directory cannot exist (its parent is a file): the change stays in
            // memory, and synchronize() reports the failed write once.
            let blocked = try FileCredentialStore(
                fileURL: URL(fileURLWithPath: path + "/inside.json"))
            blocked.set(alice, for: space("http://example.com"))
            #expect(blocked.credential(for: space("http://example.com")) == alice)
            let error = #expect(throws: TernError.self) { try blocked.synchronize() }
            #expect(error?.code == .fileWriteFailed)
            #expect(error?.message.contains("inside.json") == true)
            #expect(throws: Never.self) { try blocked.synchronize() }
        }

        @Test func concurrentFileStoreWritesEndInTheLastState() throws {
            let path = temporaryPath("credentials.json")
            defer { try? FileManager.default.removeItem(atPath: path) }
            let store = try FileCredentialStore(fileURL: URL(fileURLWithPath: path))
            DispatchQueue.concurrentPerform(iterations: 50) { i in
                store.set(
                    Credential(user: "u\(i)", password: "p"), for: space("http://h\(i).example"))
            }
            try store.synchronize()
            let reopened = try FileCredentialStore(fileURL: URL(fileURLWithPath: path))
            #expect(reopened.allCredentials.count == 50)
        }

        // MARK: Challenge parsing

        @Test func challengeParsing() {
            let parsed = AuthenticationCoordinator.parseChallenges(
                #"Digest realm="a, \"b\"", nonce="x", qop="auth", Basic realm=plain, Newauth"#)
            #expect(parsed.map(\.scheme.rawValue) == ["Digest", "Basic", "Newauth"])
            #expect(parsed.map(\.realm) == ["a, \"b\"", "plain", nil])
            #expect(
                AuthenticationCoordinator.parseChallenges("Negotiate abc==, Basic realm=\"r\"").map(
                    \.realm)
                    == [nil, "r"])
            let strongest = AuthenticationCoordinator.strongestChallenge(
                in: [#"Basic realm="b""#, #"Digest realm="d", nonce="n""#])
            #expect(strongest?.0 == .digest)
            #expect(strongest?.1 == "d")
            #expect(AuthenticationCoordinator.strongestChallenge(in: ["Bearer"]) == nil)
        }

        // MARK: Coordinator

        let target = URL(string: "http://example.com:8080/private")!

        @Test func nothingToOfferStops() {
            let coordinator = AuthenticationCoordinator(
                sessionStore: nil, persistentStore: nil, handler: nil)
            #expect(coordinator.preemptiveCredential(for: target, isProxy: false) == nil)
            #expect(
                coordinator.respond(isProxy: false, scheme: "Basic", realm: "r", url: target)
                    == .stop)
        }

        @Test func storedCredentialAnswersThenIsRemembered() {
            let session = SessionCredentialStore()
            session.set(alice, for: space("http://example.com:8080", realm: "r"))
            let coordinator = AuthenticationCoordinator(
                sessionStore: session, persistentStore: nil, handler: nil)
            #expect(
                coordinator.respond(isProxy: false, scheme: "Digest", realm: "r", url: target)
                    == .supply(alice))
            coordinator.hopResponded(status: 200, url: target)
            let recent = session.mostRecentCredential(forOriginOf: space("http://example.com:8080"))
            #expect(recent?.credential == alice)
            #expect(recent?.space.authenticationScheme == .digest)
        }

        @Test func refusedSessionCredentialIsDroppedAndTheHandlerAsked() {
            let session = SessionCredentialStore()
            let realm = space("http://example.com:8080", realm: "r")
            session.set(alice, for: realm)
            let asked = Recorder<AuthenticationChallenge>()
            let fixed = Credential(user: "alice", password: "right")
            let coordinator = AuthenticationCoordinator(sessionStore: session, persistentStore: nil)
            { challenge in
                asked.append(challenge)
                return .useCredential(fixed)
            }
            #expect(
                coordinator.respond(isProxy: false, scheme: "Basic", realm: "r", url: target)
                    == .supply(alice))
            coordinator.hopResponded(status: 401, url: target, challenges: [#"Basic realm="r""#])
            // The engine asks again: alice was refused.
            #expect(
                coordinator.respond(isProxy: false, scheme: "Basic", realm: "r", url: target)
                    == .supply(fixed))
            #expect(session.credential(for: realm) == nil)
            #expect(asked.count == 1)
            let challenge = asked.all[0]
            #expect(challenge.previousFailureCount == 1)
            #expect(challenge.proposedCredential == alice)
            #expect(challenge.protectionSpace.realm == "r")
            #expect(challenge.protectionSpace.authenticationScheme == .basic)
            #expect(challenge.url == target)
            coordinator.hopResponded(status: 200, url: target)
            #expect(session.credential(for: realm) == fixed)
        }

        @Test func handlerDispositions() {
            func coordinator(_ disposition: AuthenticationChallenge.Disposition)
                -> AuthenticationCoordinator
            {
                AuthenticationCoordinator(
                    sessionStore: SessionCredentialStore(), persistentStore: nil
                ) { _ in disposition }
            }
            #expect(
                coordinator(.cancel).respond(
                    isProxy: false, scheme: "Basic", realm: "r", url: target) == .cancel)
            #expect(
                coordinator(.performDefaultHandling).respond(
                    isProxy: false, scheme: "", realm: "", url: target) == .stop)
            // A handler that keeps giving a refused credential is stopped.
            let stubborn = coordinator(.useCredential(alice))
            var answers: [AuthenticationCoordinator.Action] = []
            for _ in 0..<20 {
                answers.append(
                    stubborn.respond(isProxy: false, scheme: "Basic", realm: "r", url: target))
            }
            #expect(answers.prefix(stubborn.maximumAttempts).allSatisfy { $0 == .supply(alice) })
            #expect(answers.dropFirst(stubborn.maximumAttempts).allSatisfy { $0 == .stop })
        }

        @Test func persistenceDecidesWhereAWorkingCredentialGoes() throws {
            let path = temporaryPath("credentials.json")
            defer { try? FileManager.default.removeItem(atPath: path) }
            for persistence in [Credential.Persistence.none, .session, .permanent] {
                let session = SessionCredentialStore()
                let file = try FileCredentialStore(fileURL: URL(fileURLWithPath: path))
                file.removeAll()
                let credential = Credential(user: "u", password: "p", persistence: persistence)
                let coordinator = AuthenticationCoordinator(
                    sessionStore: session, persistentStore: file
                ) { _ in
                    .useCredential(credential)
                }
                #expect(
                    coordinator.respond(isProxy: false, scheme: "Digest", realm: "r", url: target)
                        == .supply(credential))
                coordinator.hopResponded(status: 200, url: target)
                try file.synchronize()
                let realm = space("http://example.com:8080", realm: "r")
                #expect((session.credential(for: realm) != nil) == (persistence != .none))
                #expect(
                    (try FileCredentialStore(fileURL: URL(fileURLWithPath: path)).credential(
                        for: realm) != nil)
                        == (persistence == .permanent))
            }
        }

        @Test func preemptiveUseOfTheMostRecentCredential() {
            let session = SessionCredentialStore()
            session.set(alice, for: space("http://example.com:8080", realm: "old", scheme: .digest))
            session.set(bob, for: space("http://example.com:8080", realm: "new", scheme: .basic))
            let coordinator = AuthenticationCoordinator(
                sessionStore: session, persistentStore: nil, handler: nil)
            let preemptive = coordinator.preemptiveCredential(for: target, isProxy: false)
            #expect(preemptive?.credential == bob)
            #expect(preemptive?.scheme == .basic)
            // Refused: the next candidate of the stores is tried (alice is the realm's own).
            #expect(
                coordinator.respond(isProxy: false, scheme: "Digest", realm: "old", url: target)
                    == .supply(alice))
            // A redirect to another origin is not a refusal of the credential.
            let other = URL(string: "http://other.example/")!
            #expect(
                coordinator.respond(isProxy: false, scheme: "Basic", realm: "x", url: other)
                    == .stop)
        }

        @Test func requestCredentialLearnsItsRealm() {
            let session = SessionCredentialStore()
            let coordinator = AuthenticationCoordinator(
                sessionStore: session, persistentStore: nil, handler: nil)
            coordinator.noteRequestCredential(
                alice, for: target, isProxy: false, sentPreemptively: false)
            // A response that needed no credentials proves nothing.
            coordinator.hopResponded(status: 200, url: target)
            #expect(session.allCredentials.isEmpty)
            // The engine answers the challenge with the request's credential by itself.
            coordinator.hopResponded(
                status: 401, url: target, challenges: [#"Digest realm="staff", nonce="1""#])
            coordinator.hopResponded(status: 200, url: target)
            let stored = session.mostRecentCredential(forOriginOf: space("http://example.com:8080"))
            #expect(stored?.credential == alice)
            #expect(stored?.space.realm == "staff")
            #expect(stored?.space.authenticationScheme == .digest)
        }

        @Test func proxyChallengesUseTheProxySpace() {
            let session = SessionCredentialStore()
            let proxyURL = URL(string: "http://proxy.example:3128")!
            session.set(bob, for: space("http://proxy.example:3128", realm: "squid", proxy: true))
            session.set(alice, for: space("http://example.com:8080", realm: "squid"))
            let coordinator = AuthenticationCoordinator(
                sessionStore: session, persistentStore: nil, handler: nil)
            #expect(
                coordinator.respond(
                    isProxy: true, scheme: "Basic", realm: "squid", url: target, proxyURL: proxyURL)
                    == .supply(bob))
            #expect(
                coordinator.respond(isProxy: false, scheme: "Basic", realm: "squid", url: target)
                    == .supply(alice))
            // The origin's answer that is not a 401 confirms the server credential; not being a
            // 407, it confirms the proxy credential too.
            coordinator.hopResponded(status: 200, url: target)
            let proxy = session.mostRecentCredential(
                forOriginOf: space("http://proxy.example:3128", proxy: true))
            #expect(proxy?.credential == bob)
        }
    }
}
