// Several transfers from the `tern` command line, as curl does them: -o/-O paired with URLs in
// order, --remote-name-all, one after another by default, at once with -Z (at most
// --parallel-max, counted by the fault server's /probe; --parallel-immediate accepted and
// changing nothing), curl's exit code rule for several transfers, --fail-early, Ctrl-C in the
// middle of a -Z run, and the -Z progress line.

import Foundation
import Testing
@testable import Tern

/// faultserver's /probe-stats for one tag: how many requests came, the most in progress at
/// once, and their ids in arrival order.
struct CLIProbeStats {
    var count: Int
    var maxInflight: Int
    var order: [Int]

    init(_ servers: Servers, tag: String) throws {
        let run = try tern(["-s", servers.fault("/probe-stats?tag=\(tag)").absoluteString])
        let object = try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any] ?? [:]
        count = object["count"] as? Int ?? -1
        maxInflight = object["max_inflight"] as? Int ?? -1
        order = (object["order"] as? [Any] ?? []).compactMap {
            ($0 as? Int) ?? ($0 as? String).flatMap { Int($0) }
        }
    }
}

/// A fresh /probe tag, so that tests (and runs) never count each other's requests.
func probeTag(_ name: String) -> String { "\(name)-\(UUID().uuidString.prefix(8))" }

/// A fresh empty directory, removed by the caller.
func temporaryDirectory(_ name: String) throws -> String {
    let dir = temporaryPath(name)
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

extension TernTests {
    @Suite struct CLIParallel {
        /// `/probe` URLs of one tag, id i answering `size(i)` pattern bytes after `holdMS`.
        static func probes(_ servers: Servers, tag: String, count: Int, holdMS: Int,
                           size: (Int) -> Int = { 1000 * $0 + 17 }) -> [String] {
            (0..<count).map {
                servers.fault("/probe?tag=\(tag)&id=\($0)&hold_ms=\(holdMS)&size=\(size($0))")
                    .absoluteString
            }
        }

        @Test func parallelMaxThreeNeverHasMoreThanThreeOpen() throws {
            let servers = try Servers.get()
            let dir = try temporaryDirectory("par3")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let tag = probeTag("par3")
            let urls = Self.probes(servers, tag: tag, count: 8, holdMS: 300)
            var arguments = ["-s", "-Z", "--parallel-max", "3"]
            for (index, url) in urls.enumerated() { arguments += ["-o", "f\(index)", url] }
            let run = try tern(arguments, directory: dir)
            #expect(run.status == 0, "\(run.stderr)")
            for index in urls.indices {
                #expect(FileManager.default.contents(atPath: dir + "/f\(index)")
                    == pattern(1000 * index + 17), "file f\(index)")
            }
            let stats = try CLIProbeStats(servers, tag: tag)
            #expect(stats.count == 8)
            #expect(stats.maxInflight == 3, "at most 3 at once, and 3 did run at once")
            // 8 transfers of 300 ms, 3 at a time: 3 rounds at least, well under 8 in turn.
            #expect(run.seconds >= 0.9)
            #expect(run.seconds < 2.4 + 2, "ran in parallel, not one after another")
        }

        @Test func parallelFilesAreByteIdentical() throws {
            // The command: -Z --parallel-max 3 -o a URL1 -o b URL2 -o c URL3 -o d URL4,
            // its URLs tagged /probe resources, so that one run shows both the files (byte for
            // byte, an empty one and a 5 MB one among them) and what the server saw at once.
            let servers = try Servers.get()
            let dir = try temporaryDirectory("par-files")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let tag = probeTag("par-files")
            let sizes = [1024, 65_536, 5_000_000, 0]
            let urls = Self.probes(servers, tag: tag, count: 4, holdMS: 300, size: { sizes[$0] })
            let names = ["a", "b", "c", "d"]
            var arguments = ["-s", "-Z", "--parallel-max", "3"]
            for (name, url) in zip(names, urls) { arguments += ["-o", name, url] }
            let run = try tern(arguments, directory: dir)
            #expect(run.status == 0, "\(run.stderr)")
            for (name, size) in zip(names, sizes) {
                #expect(FileManager.default.contents(atPath: dir + "/" + name) == pattern(size), "file \(name)")
            }
            let left = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
            #expect(left == names, "no .part file left")
            let stats = try CLIProbeStats(servers, tag: tag)
            #expect(stats.count == 4)
            #expect(stats.maxInflight == 3, "never more than 3 at once, and 3 did run at once")
        }

        @Test func parallelImmediateIsAcceptedAndChangesNothing() throws {
            // curl's --parallel-immediate prefers new connections to waiting to multiplex on
            // one; over HTTP/1.1 every running transfer has a connection of its own, so the
            // run is the same as without it: the same files, the same limit.
            let servers = try Servers.get()
            let dir = try temporaryDirectory("par-immediate")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let tag = probeTag("par-immediate")
            let urls = Self.probes(servers, tag: tag, count: 4, holdMS: 300)
            var arguments = ["-s", "-Z", "--parallel-immediate", "--parallel-max", "3"]
            for (index, url) in urls.enumerated() { arguments += ["-o", "f\(index)", url] }
            let run = try tern(arguments, directory: dir)
            #expect(run.status == 0, "\(run.stderr)")
            for index in urls.indices {
                #expect(FileManager.default.contents(atPath: dir + "/f\(index)") == pattern(1000 * index + 17),
                        "file f\(index)")
            }
            let stats = try CLIProbeStats(servers, tag: tag)
            #expect(stats.count == 4)
            #expect(stats.maxInflight == 3, "--parallel-max still holds, and the transfers ran at once")
            // Without -Z it is accepted too, and the transfers still run one after another.
            let serialTag = probeTag("par-immediate-serial")
            let serial = try tern(["-s", "--parallel-immediate", "-o", "s0", "-o", "s1"]
                                  + Self.probes(servers, tag: serialTag, count: 2, holdMS: 50), directory: dir)
            #expect(serial.status == 0, "\(serial.stderr)")
            #expect(FileManager.default.contents(atPath: dir + "/s1") == pattern(1017))
            let serialStats = try CLIProbeStats(servers, tag: serialTag)
            #expect(serialStats.maxInflight == 1 && serialStats.order == [0, 1])
        }

        @Test func parallelDefaultRunsAllAtOnceAndOutOfRangeMaxIsCurls() throws {
            let servers = try Servers.get()
            // -Z alone: curl's default of 50, so all 10 run at once, to one host (beyond the
            // engine's default of 6 connections per origin, which -Z lifts, as curl has none).
            for extra in [[], ["--parallel-max", "0"], ["--parallel-max", "1000"]] {
                let tag = probeTag("pardefault")
                let urls = Self.probes(servers, tag: tag, count: 10, holdMS: 500)
                let run = try tern(["-s", "-Z"] + Array(repeating: ["-o", "/dev/null"], count: 10).flatMap { $0 }
                                   + extra + urls)
                #expect(run.status == 0, "\(extra): \(run.stderr)")
                let stats = try CLIProbeStats(servers, tag: tag)
                #expect(stats.count == 10)
                #expect(stats.maxInflight == 10, "\(extra): all at once")
            }
            // --parallel-max 1: one at a time, in order, even with -Z.
            let tag = probeTag("parone")
            let run = try tern(["-s", "-Z", "--parallel-max", "1"]
                               + Self.probes(servers, tag: tag, count: 4, holdMS: 50))
            #expect(run.status == 0)
            let stats = try CLIProbeStats(servers, tag: tag)
            #expect(stats.maxInflight == 1)
            #expect(stats.order == [0, 1, 2, 3])
        }

        @Test func withoutZOneAtATimeInOrder() throws {
            let servers = try Servers.get()
            let dir = try temporaryDirectory("serial")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let tag = probeTag("serial")
            let urls = Self.probes(servers, tag: tag, count: 5, holdMS: 100)
            var arguments = ["-s"]
            for (index, url) in urls.enumerated() { arguments += ["-o", "f\(index)", url] }
            let run = try tern(arguments, directory: dir)
            #expect(run.status == 0, "\(run.stderr)")
            let stats = try CLIProbeStats(servers, tag: tag)
            #expect(stats.count == 5)
            #expect(stats.maxInflight == 1)
            #expect(stats.order == [0, 1, 2, 3, 4])
            for index in urls.indices {
                #expect(FileManager.default.contents(atPath: dir + "/f\(index)") == pattern(1000 * index + 17))
            }
            // -Z writes to stdout too: bodies without an -o go there, whole.
            let tagZ = probeTag("stdout")
            let both = try tern(["-s", "-Z"] + Self.probes(servers, tag: tagZ, count: 2, holdMS: 50, size: { _ in 100 }))
            #expect(both.stdout == pattern(100) + pattern(100))
        }

        @Test func exitCodeRuleForSeveralTransfers() throws {
            let servers = try Servers.get()
            let dir = try temporaryDirectory("codes")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let good = servers.nginx("/64k.txt").absoluteString
            let missing = servers.fault("/status/404?size=100").absoluteString
            let refused = "http://127.0.0.1:1/"
            let expected = try fixture(servers, "64k.txt")
            func codes(_ parallel: Bool, _ urls: [String]) throws -> Int32 {
                for name in ["o0", "o1", "o2"] { try? FileManager.default.removeItem(atPath: dir + "/" + name) }
                var arguments = ["-sf"] + (parallel ? ["-Z"] : [])
                for (index, url) in urls.enumerated() { arguments += ["-o", "o\(index)", url] }
                let run = try tern(arguments, directory: dir)
                for (index, url) in urls.enumerated() where url == good {
                    #expect(FileManager.default.contents(atPath: dir + "/o\(index)") == expected,
                            "the good file is complete")
                }
                return run.status
            }
            // One after another: the last transfer's code (curl: "the last URL's success
            // determines the error code").
            #expect(try codes(false, [missing, good]) == 0)
            #expect(try codes(false, [refused, good]) == 0)
            #expect(try codes(false, [good, missing]) == 22)
            #expect(try codes(false, [missing, refused]) == 7)
            #expect(try codes(false, [refused, missing]) == 22)
            // -Z: a failure is never hidden by a later success; the last one to fail decides.
            #expect(try codes(true, [missing, good]) == 22)
            #expect(try codes(true, [refused, good]) == 7)
            #expect(try codes(true, [good, good]) == 0)
            // -Z: the order in which they end counts, not the command line's: the refusal is
            // at once, the stall times out (28) a second later and is the last failure.
            let stall = servers.fault("/stall?stall_ms=3000").absoluteString
            let timed = try tern(["-sf", "-Z", "-m", "1", "-o", "/dev/null", stall, "-o", "/dev/null", refused,
                                  "-o", "o2", good], directory: dir)
            #expect(timed.status == 28)
            #expect(FileManager.default.contents(atPath: dir + "/o2") == expected)
            let inTurn = try tern(["-sf", "-m", "1", "-o", "/dev/null", stall, "-o", "/dev/null", refused])
            #expect(inTurn.status == 7, "one after another, the last URL decides")
        }

        @Test func failEarlyStopsAtTheFirstFailure() throws {
            let servers = try Servers.get()
            let dir = try temporaryDirectory("early")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let missing = servers.fault("/status/404?size=100").absoluteString
            // One after another: nothing after the failure is fetched.
            let tag = probeTag("early")
            let after = Self.probes(servers, tag: tag, count: 2, holdMS: 10)
            let serial = try tern(["-sSf", "--fail-early", "-o", "a", missing, "-o", "b", after[0],
                                   "-o", "c", after[1]], directory: dir)
            #expect(serial.status == 22)
            #expect(try CLIProbeStats(servers, tag: tag).count == 0, "no transfer after the failure")
            let plain = try tern(["-sSf", "-o", "a", missing, "-o", "b", after[0], "-o", "c", after[1]],
                                 directory: dir)
            #expect(plain.status == 0, "without --fail-early the last transfer decides")

            // -Z: the running transfers are aborted (42), the first failure's code stands, and
            // an aborted download leaves neither its file nor a .part.
            let slow = servers.fault("/ok?size=20000000&drip_ms=20&drip_bytes=65536").absoluteString
            let parallel = try tern(["-sSf", "-Z", "--fail-early", "-o", "slow", slow,
                                     "-o", "missing", servers.fault("/status/404?size=100").absoluteString],
                                    directory: dir)
            #expect(parallel.status == 22)
            #expect(parallel.seconds < 5, "the slow transfer was aborted, not waited for")
            #expect(parallel.stderr.contains("(22)"))
            #expect(parallel.stderr.contains("(42) Transfer aborted due to critical error in another transfer"))
            #expect(!FileManager.default.fileExists(atPath: dir + "/slow"))
            #expect(!FileManager.default.fileExists(atPath: dir + "/slow.part"))
        }

        @Test func remoteNameAndRemoteNameAll() throws {
            let servers = try Servers.get()
            let dir = try temporaryDirectory("remote")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let oneK = try fixture(servers, "1k.bin")
            let sixtyFourK = try fixture(servers, "64k.txt")
            // -O per URL, in parallel.
            let run = try tern(["-s", "-Z", "-O", servers.nginx("/1k.bin").absoluteString,
                                "-O", servers.nginx("/64k.txt").absoluteString], directory: dir)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(FileManager.default.contents(atPath: dir + "/1k.bin") == oneK)
            #expect(FileManager.default.contents(atPath: dir + "/64k.txt") == sixtyFourK)
            try FileManager.default.removeItem(atPath: dir + "/1k.bin")
            try FileManager.default.removeItem(atPath: dir + "/64k.txt")

            // --remote-name-all: every URL without an -o or -O of its own, with or without -Z;
            // -o pairs with the first URL.
            for parallel in [false, true] {
                let all = try tern(["-s", "--remote-name-all"] + (parallel ? ["-Z"] : [])
                                   + ["-o", "first", servers.nginx("/64k.txt").absoluteString,
                                      servers.nginx("/1k.bin").absoluteString,
                                      servers.fault("/ok?size=300").absoluteString],
                                   directory: dir)
                #expect(all.status == 0, "\(all.stderr)")
                #expect(all.stdout.isEmpty, "nothing to stdout")
                #expect(FileManager.default.contents(atPath: dir + "/first") == sixtyFourK)
                #expect(FileManager.default.contents(atPath: dir + "/1k.bin") == oneK)
                #expect(FileManager.default.contents(atPath: dir + "/ok") == pattern(300))
                for name in ["first", "1k.bin", "ok"] { try? FileManager.default.removeItem(atPath: dir + "/" + name) }
            }
            // A URL without a file name fails that transfer (23); the others are complete.
            let mixed = try tern(["-s", "-Z", "--remote-name-all", servers.nginx("/").absoluteString,
                                  servers.nginx("/1k.bin").absoluteString], directory: dir)
            #expect(mixed.status == 23)
            #expect(FileManager.default.contents(atPath: dir + "/1k.bin") == oneK)
        }

        @Test func interruptLeavesCompleteFilesAndNoPartialOnes() throws {
            let servers = try Servers.get()
            let dir = try temporaryDirectory("sigint")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let precious = Data("keep me\n".utf8)
            _ = FileManager.default.createFile(atPath: dir + "/slow1", contents: precious)
            let slow = servers.fault("/ok?size=20000000&drip_ms=20&drip_bytes=65536").absoluteString
            let process = Process()
            process.executableURL = URL(fileURLWithPath: TernBinary.path)
            process.arguments = ["-s", "-Z", "-o", "quick", servers.nginx("/64k.txt").absoluteString,
                                 "-o", "slow1", slow, "-o", "slow2", slow,
                                 "-o", "quick2", servers.nginx("/1k.bin").absoluteString]
            process.currentDirectoryURL = URL(fileURLWithPath: dir)
            process.environment = childEnvironment()
            try process.run()
            #expect(eventually(within: 5) {
                fileSize(dir + "/slow1.part") > 0 && fileSize(dir + "/slow2.part") > 0
                    && FileManager.default.fileExists(atPath: dir + "/quick2")
            }, "the quick downloads ended, the slow ones began")
            process.interrupt()
            process.waitUntilExit()
            #expect(process.terminationReason == .uncaughtSignal)
            #expect(process.terminationStatus == SIGINT)
            #expect(FileManager.default.contents(atPath: dir + "/quick") == (try fixture(servers, "64k.txt")))
            #expect(FileManager.default.contents(atPath: dir + "/quick2") == (try fixture(servers, "1k.bin")))
            #expect(FileManager.default.contents(atPath: dir + "/slow1") == precious, "never touched")
            #expect(!FileManager.default.fileExists(atPath: dir + "/slow2"))
            let left = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
            #expect(left == ["quick", "quick2", "slow1"], "no .part file left")
        }

        @Test func progressLineOnATerminalOnly() throws {
            let servers = try Servers.get()
            let dir = try temporaryDirectory("meter")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let urls = Self.probes(servers, tag: probeTag("meter"), count: 3, holdMS: 400, size: { _ in 5000 })
            let outputs = ["-o", "a", "-o", "b", "-o", "c"]
            // Not a terminal: nothing on stderr, even without -s.
            let quiet = try tern(["-Z"] + outputs + urls, directory: dir)
            #expect(quiet.status == 0)
            #expect(quiet.stderr.isEmpty)
            // A terminal (script(1) gives tern a pseudo-terminal): the header once, then the
            // line, redrawn, ending with every transfer done.
            let onTerminal = try terminal(["-Z"] + outputs + urls, directory: dir)
            #expect(onTerminal.contains("DL% UL%  Dled  Uled  Xfers  Live Total     Current  Left     Speed"))
            #expect(onTerminal.components(separatedBy: "DL% UL%").count == 2, "the header once")
            let last = onTerminal.components(separatedBy: "\r\u{1B}[K").last ?? ""
            let fields = last.split(separator: " ")
            #expect(fields.first == "100", "\(last)")
            #expect(fields.count >= 6 && fields[2] == "15000" && fields[4] == "3" && fields[5] == "0",
                    "15000 bytes, 3 transfers, none live: \(last)")
            #expect(try terminal(["-s", "-Z"] + outputs + urls, directory: dir).isEmpty, "-s: nothing")
        }

        /// Runs tern under script(1), on a pseudo-terminal, and returns what it wrote there.
        func terminal(_ arguments: [String], directory: String) throws -> String {
            let command = ([TernBinary.path] + arguments).map { "'\($0)'" }.joined(separator: " ")
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
            process.arguments = ["-qec", command, "/dev/null"]
            process.currentDirectoryURL = URL(fileURLWithPath: directory)
            process.environment = childEnvironment()
            let out = Pipe()
            process.standardOutput = out
            process.standardInput = Pipe()
            try process.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            return String(decoding: data, as: UTF8.self)
        }
    }
}
