// Proxy auto-configuration: ProxyAutoConfiguration with real scripts run by tern-pac (built by
// SwiftPM beside the tests), choosing per host, per URL and per redirect hop among squid, Dante
// and DIRECT; failover past a dead proxy; scripts that throw, do not compile or loop for ever;
// and `tern --proxy-pac`.

import Foundation
import Testing
@testable import Tern

extension TernTests.Hops {
    func pac(_ script: String, timeout: Duration = .seconds(2)) throws -> ProxyAutoConfiguration {
        try ProxyAutoConfiguration(script: script, timeout: timeout)
    }

    @Test func pacChoosesPerHostAndPerURL() async throws {
        let servers = try Servers.get()
        let socks = try servers.must("SOCKS_PORT")
        let squid = try servers.must("SQUID_PORT")
        let script = try pac("""
            function FindProxyForURL(url, host) {
              if (host == "localhost") return "SOCKS5 127.0.0.1:\(socks)";
              if (shExpMatch(url, "*/echo?via=squid*")) return "PROXY 127.0.0.1:\(squid)";
              return "DIRECT";
            }
            """)
        #expect(try script.findProxy(for: url("http://localhost/")) == "SOCKS5 127.0.0.1:\(socks)")
        #expect(try script.findProxy(for: url("http://example.com/echo?via=squid")) == "PROXY 127.0.0.1:\(squid)")

        let faultPort = String(servers.faultPort)
        let bySocks = isolated(url("http://localhost:\(faultPort)/echo"))
        bySocks.proxyAutoConfiguration = script
        let socksResponse = try await bySocks.response()
        #expect(socksResponse.statusCode == 200)
        #expect(try danteCarried(servers, socksResponse, to: faultPort))

        let bySquid = isolated(servers.fault("/echo?via=squid"))
        bySquid.proxyAutoConfiguration = script
        #expect(viaSquid(try await bySquid.response()))

        let direct = isolated(servers.fault("/echo?via=none"))
        direct.proxyAutoConfiguration = script
        let directResponse = try await direct.response()
        #expect(!viaSquid(directResponse))
        #expect(try !danteCarried(servers, directResponse, to: faultPort))
    }

    @Test func pacFailsOverPastADeadProxy() async throws {
        let servers = try Servers.get()
        let squid = try servers.must("SQUID_PORT")
        let script = try pac("""
            function FindProxyForURL(url, host) {
              return "PROXY 127.0.0.1:1; PROXY 127.0.0.1:\(squid); DIRECT";
            }
            """)
        let request = isolated(servers.fault("/echo"))
        request.proxyAutoConfiguration = script
        #expect(viaSquid(try await request.response()))
    }

    @Test func pacIsAskedForEveryRedirectHop() async throws {
        let servers = try Servers.get()
        let socks = try servers.must("SOCKS_PORT")
        // The first hop is the fault server's second port, which no other test sends through
        // Dante (its count in Dante's log must not move); the redirect's target goes through it.
        let faultPort = try servers.must("FAULT2_PORT")
        let nginx = String(servers.nginxPort)
        let script = try pac("""
            function FindProxyForURL(url, host) {
              return url.indexOf(":\(nginx)/") >= 0 ? "SOCKS5 127.0.0.1:\(socks)" : "DIRECT";
            }
            """)
        let target = "http://127.0.0.1:\(nginx)/1k.bin"
        let encoded = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let faultBefore = try danteConnections(servers, "open", to: faultPort)
        let request = isolated(url("http://127.0.0.1:\(faultPort)/redirect?status=302&to=\(encoded)"))
        request.proxyAutoConfiguration = script
        let response = try await request.response()
        #expect(response.statusCode == 200)
        #expect(response.data == (try fixture(servers, "1k.bin")))
        #expect(try danteCarried(servers, response, to: nginx))
        #expect(try danteConnections(servers, "open", to: faultPort) == faultBefore)
    }

    @Test func badScriptsFailWithAClearError() async throws {
        let servers = try Servers.get()
        // Does not compile: refused when loaded.
        let syntax = #expect(throws: TernError.self) {
            try ProxyAutoConfiguration(script: "function FindProxyForURL(url, host) { return ")
        }
        #expect(syntax?.code == .proxyError)
        // Defines no FindProxyForURL.
        #expect(throws: TernError.self) { try ProxyAutoConfiguration(script: "var x = 1;") }

        // Throws for one host, loops for ever for another; the rest go direct.
        let script = try pac(
            """
            function FindProxyForURL(url, host) {
              if (host == "throws.example") throw new Error("no proxy for you");
              if (host == "loops.example") { while (true) {} }
              return "DIRECT";
            }
            """, timeout: .milliseconds(500))
        let thrower = isolated(url("http://throws.example/"))
        thrower.proxyAutoConfiguration = script
        guard case .failure(let thrown) = await outcome(thrower) else {
            Issue.record("a throwing PAC script let the request through")
            return
        }
        #expect(thrown == .proxyError)
        #expect(thrown.message.contains("no proxy for you"))

        let looper = isolated(url("http://loops.example/"))
        looper.proxyAutoConfiguration = script
        let started = ContinuousClock.now
        guard case .failure(let stuck) = await outcome(looper) else {
            Issue.record("a looping PAC script let the request through")
            return
        }
        #expect(stuck == .proxyError)
        #expect(stuck.message.contains("did not return within"))
        #expect(ContinuousClock.now - started < .seconds(5))

        // The evaluator was replaced: the same configuration still answers.
        let fine = isolated(servers.fault("/echo"))
        fine.proxyAutoConfiguration = script
        #expect(try await fine.response().statusCode == 200)
    }

    @Test func cliProxyPAC() throws {
        let servers = try Servers.get()
        let squid = try servers.must("SQUID_PORT")
        let file = temporaryPath("proxy.pac")
        defer { try? FileManager.default.removeItem(atPath: file) }
        try """
            function FindProxyForURL(url, host) {
              return isPlainHostName(host) ? "DIRECT" : "PROXY 127.0.0.1:1; PROXY 127.0.0.1:\(squid)";
            }
            """.write(toFile: file, atomically: true, encoding: .utf8)
        let run = try ternTool(["-s", "--proxy-pac", file, servers.fault("/echo").absoluteString])
        #expect(run.status == 0)
        #expect(run.text.contains("tern-squid-"), "the echo shows squid's Via")
        // -x loses to the script.
        let both = try ternTool([
            "-s", "-x", "http://127.0.0.1:1", "--proxy-pac", file, servers.fault("/echo").absoluteString,
        ])
        #expect(both.status == 0)

        // From a URL: fetched once when the run starts.
        let www = try servers.must("WWW")
        try FileManager.default.copyItem(atPath: file, toPath: www + "/tern-test.pac")
        defer { try? FileManager.default.removeItem(atPath: www + "/tern-test.pac") }
        let fromURL = try ternTool([
            "-s", "--proxy-pac", "http://127.0.0.1:\(servers.nginxPort)/tern-test.pac",
            servers.fault("/echo").absoluteString,
        ])
        #expect(fromURL.status == 0)
        #expect(fromURL.text.contains("tern-squid-"))
        let notFound = try ternTool([
            "-sS", "--proxy-pac", "http://127.0.0.1:\(servers.nginxPort)/no-such.pac",
            servers.fault("/echo").absoluteString,
        ])
        #expect(notFound.status == 5)
        #expect(notFound.stderr.contains("404"))

        // A script that cannot be loaded, or that fails: exit 5, and a message that says why.
        try "function FindProxyForURL(url, host) { throw new Error('down'); }"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let failing = try ternTool(["-sS", "--proxy-pac", file, servers.fault("/echo").absoluteString])
        #expect(failing.status == 5)
        #expect(failing.stderr.contains("down"))
        let missing = try ternTool(["-sS", "--proxy-pac", "/nonexistent.pac", servers.fault("/echo").absoluteString])
        #expect(missing.status == 5)
        #expect(missing.stderr.contains("/nonexistent.pac"))
    }

    /// Ctrl-C while the PAC script is still loading (before any transfer starts) ends the
    /// process by SIGINT. Before, the signal stayed pending with no reader until the script
    /// came (here: a 60 s body timeout), and then setting SIG_IGN discarded it: the transfer
    /// went on as if no key had been pressed.
    @Test func cliCtrlCWhileThePACScriptLoadsEndsTheProcess() throws {
        let servers = try Servers.get()
        // A head, half the body, then nothing: the script never finishes loading.
        let stalling = servers.fault("/stall?len=4000").absoluteString
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TernBinary.path)
        process.arguments = ["-s", "--proxy-pac", stalling, servers.fault("/echo").absoluteString]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        Thread.sleep(forTimeInterval: 0.5)  // the script's request is under way
        #expect(process.isRunning, "tern ended before the signal")
        let sent = ContinuousClock.now
        process.interrupt()
        let ended = eventually(within: 5) { !process.isRunning }
        if !ended { process.terminate() }
        process.waitUntilExit()
        #expect(ended, "tern was still running 5 s after SIGINT")
        #expect(process.terminationReason == .uncaughtSignal)
        #expect(process.terminationStatus == SIGINT)
        #expect(ContinuousClock.now - sent < .seconds(5))
    }

    /// Ctrl-C (SIGINT to tern alone) while a PAC script loops in its top-level code: tern ends
    /// by the signal, and its tern-pac, which no one will kill or read any more, ends too
    /// (it watches for its parent's end) instead of spinning on.
    @Test func cliCtrlCDuringALoopingPACScriptLeavesNoEvaluatorBehind() throws {
        let servers = try Servers.get()
        let file = temporaryPath("looping.pac")
        defer { try? FileManager.default.removeItem(atPath: file) }
        try "while (true) {}\nfunction FindProxyForURL(url, host) { return \"DIRECT\"; }\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TernBinary.path)
        process.arguments = ["-s", "--proxy-pac", file, servers.fault("/echo").absoluteString]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        var evaluator: pid_t?
        #expect(eventually(within: 2) {
            evaluator = childProcesses(of: process.processIdentifier, named: "tern-pac").first
            return evaluator != nil
        }, "tern started no tern-pac")
        process.interrupt()  // within the 2 s the script is given: tern has not killed it yet
        // Read from /proc: Foundation's Process may not see tern's end while a child of tern
        // lives on (so a leftover tern-pac is killed before waiting for tern).
        let tern = process.processIdentifier
        let ended = eventually(within: 5) { !processIsAlive(tern) }
        if let evaluator {
            // It notices its parent's end within 200 ms; the bound is wide because under
            // ThreadSanitizer a looping script and the rest of the suite can starve its watching
            // thread for seconds (CI once saw it outlive 3 s). One that never ends still fails.
            let gone = eventually(within: 15) { !processIsAlive(evaluator) }
            if !gone { kill(evaluator, SIGKILL) }
            #expect(gone, "tern-pac \(evaluator) still runs 15 s after tern ended")
        }
        if !ended { process.terminate() }
        process.waitUntilExit()
        #expect(ended, "tern was still running 5 s after SIGINT")
        #expect(process.terminationReason == .uncaughtSignal)
        #expect(process.terminationStatus == SIGINT)
    }
}

/// The children of `parent` whose command name is `name` (from /proc/PID/stat).
func childProcesses(of parent: pid_t, named name: String) -> [pid_t] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { entry -> pid_t? in
        guard let pid = pid_t(entry), let stat = processStat(pid) else { return nil }
        return stat.parent == parent && stat.name == name ? pid : nil
    }
}

/// Running or sleeping, not gone and not a zombie waiting to be reaped.
func processIsAlive(_ pid: pid_t) -> Bool {
    guard let stat = processStat(pid) else { return false }
    return stat.state != "Z" && stat.state != "X"
}

/// Fields of /proc/PID/stat: "pid (comm) state ppid ...", comm may hold spaces and parentheses.
private func processStat(_ pid: pid_t) -> (name: String, state: String, parent: pid_t)? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")")
    else { return nil }
    let name = String(text[text.index(after: open)..<close])
    let rest = text[text.index(after: close)...].split(separator: " ")
    guard rest.count >= 2, let ppid = pid_t(rest[1]) else { return nil }
    return (name, String(rest[0]), ppid)
}
