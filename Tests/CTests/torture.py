#!/usr/bin/env python3
"""The allocation-failure torture run (issue 10; curl's "torture" mode).

Runs selected C test cases of a TERN_TORTURE build (cmake -DTERN_TORTURE=ON -DTERN_ASAN=ON, see
Tests/CTests/torture.c) with the N-th engine allocation failing, for every N: first one run that
only counts the allocations (A), then N = 1..A (every N; a stride when A exceeds --max-runs,
printed). Each run is its own process with a timeout.

A case's own assertions may fail under injection: the engine is expected to report TERN_ENOMEM,
not to succeed. A defect is a crash (a signal, an assert() in the engine), an ASan / UBSan /
LeakSanitizer report (also after a failed assertion: runner.c then frees the engines the case
left and exits normally, so LeakSanitizer checks the error paths), a hang (the runner's watchdog,
this script's timeout, a "timed out waiting" assertion: a lost completion), or a case that fails
without injection. Exit codes: Tests/CTests/torture.h.

Usage: torture.py [--jobs 2] [--timeout 40] [--max-runs 250] [--scope uv,ssl] BUILD_DIR [AREA:CASE ...]
Starts and stops the test servers itself (BUILD_DIR/torture-servers). Exits 1 when any defect
was found, after printing each (case, N, kind, the failing allocation's site, the report).
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# What each covers; every case runs in well under a second, so the whole list takes a few
# minutes on 2 cores (about 5000 runs).
CASES = [
    "http:http_memory_body_1k",                       # plain GET, body in memory
    "http:http_download_1k",                          # download to a file through .part
    "http:http_chunked_from_nginx",                   # chunked response
    "http:http_keepalive_reuse",                      # keep-alive, pooled connections
    "http:http_pipelining",                           # pipelining (about 1800 allocations)
    "http:http_resume_truncated_file",                # resume a .part with Range
    "hops:redirect_chain_count_and_effective_url",    # redirects
    "hops:redirect_308_resends_file_and_segment_bodies",  # upload from file and segments, resent
    "hops:auth_basic_after_challenge_nginx",          # Basic after a 401
    "hops:auth_digest_md5_apache",                    # Digest (MD5, apache)
    "hops:auth_digest_sha256_lighttpd",               # Digest (SHA-256, lighttpd)
    "hops:proxy_https_connect",                       # CONNECT tunnel through a proxy, TLS inside
    "hops:proxy_digest_auth",                         # proxy Digest authentication
    "ntlm:ntlm_domain_user_succeeds_on_one_connection",  # NTLM, the connection kept between hops
    "ntlm:ntlm_proxy_authentication",                 # NTLM to a proxy, wrong password too
    "ntlm:ntlm_proxy_connect_tunnel",                 # NTLM on CONNECT, then TLS in the tunnel
    "body:body_gzip_compressible_text",               # gzip decoding
    "body:body_gzip_request_body",                    # gzip-compressed request body
    "body:body_expect_continue_answered",             # upload with Expect: 100-continue
    "body:body_canceled_download_leaves_old_file",    # cancel a download to a file
    "tls:tls_download_1k",                            # TLS
    "tls:tls_session_resumption",                     # TLS session cache
    "tls:tls_cancel_and_shutdown_during_handshake",   # cancel and shutdown mid-handshake
    "faults:faults_cancel_from_progress",             # cancel from a callback
    "faults:faults_truncated_body",                   # a body cut short
    "faults:faults_echo_chunked_callback_body",       # upload from a read callback, chunked
    "hops:redirect_hop_callbacks_cancel",             # cancel from a hop callback
    "http:http_shutdown_completes_pending",           # tern_engine_free with requests pending
    "faults:faults_echo_file_body_slice",             # upload a file slice
    "faults:faults_closenext_retried",                # silent retry on a stale connection
    "faults:faults_interim_responses",                # 1xx responses
    "faults:faults_bad_chunks",                       # malformed chunked bodies
    "hostile:hostile_decode_br_and_zstd",             # br and zstd decoding
    "http2:h2_alpn_negotiates_h2",                    # HTTP/2 over TLS, two streams
    "http2:h2_redirect",                              # a hop over HTTP/2
    "http2:h2_basic_auth",                            # a 401 and its answer over HTTP/2
]

EXIT_ASSERT, EXIT_ASSERT_OTHER, EXIT_LIVE, EXIT_SANITIZER, EXIT_WATCHDOG, EXIT_FREE_HANG = 3, 4, 5, 23, 124, 125


def run(build, area, case, fail_at, timeout, env):
    e = dict(env, TERN_TORTURE_FAIL_AT=str(fail_at))
    exe = os.path.join(build, "test-" + area)
    start = time.monotonic()
    try:
        p = subprocess.run([exe, case], env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout, cwd=build)
        rc, out = p.returncode, p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as t:
        rc, out = None, (t.stdout or b"").decode("utf-8", "replace")
    return rc, out, time.monotonic() - start


def calls_of(out):
    m = re.search(r"torture: calls=(\d+)", out)
    return int(m.group(1)) if m else None


def classify(rc, out):
    """(defect kind or None, outcome) for one run."""
    if rc is None:
        return "hang (killed by the driver's timeout)", None
    if "timed out waiting" in out:
        return "hang (a completion never came: the case's wait timed out)", None
    if rc == 0:
        return None, "passed"
    if rc == EXIT_ASSERT:
        return None, "assertion failed (clean-up, leak-checked)"
    if rc == EXIT_ASSERT_OTHER:
        return None, "assertion failed on the loop thread (not leak-checked)"
    if rc == EXIT_LIVE:
        return "lost reference (request objects alive after the clean-up)", None
    if rc == EXIT_SANITIZER:
        if "LeakSanitizer" in out:
            return "leak (LeakSanitizer)", None
        m = re.search(r"ERROR: AddressSanitizer: ([\w-]+)", out)
        if m:
            return "AddressSanitizer: " + m.group(1), None
        if "runtime error" in out:
            return "UBSan: runtime error", None
        return "sanitizer report", None
    if rc == EXIT_WATCHDOG:
        return "hang (the runner's watchdog)", None
    if rc == EXIT_FREE_HANG:
        return "hang (tern_engine_free after a failed assertion)", None
    if rc < 0:
        return "crash (signal %d)" % -rc, None
    return "unexpected exit code %d" % rc, None


FRAME = re.compile(r"^\s+#\d+ 0x[0-9a-f]+ in (\S+) (\S+)")


def engine_frames(text):
    """'function file:line' of the stack frames in CSources/ (in order) of a report part."""
    frames = []
    for line in text.splitlines():
        m = FRAME.match(line)
        if m and "/CSources/" in m.group(2) and not m.group(1).startswith("tern__alloc"):
            frames.append("%s %s" % (m.group(1), m.group(2).split("/CSources/")[1]))
    return frames


def alloc_site(out):
    """Where the failing allocation was: the first engine frame above tern__malloc & co."""
    m = re.search(r"torture: failing allocation #\d+ here:\n((?:\s+#.*\n)+)", out)
    if not m:
        return "?"
    frames = [f for f in engine_frames(m.group(1)) if not f.startswith("tern__")]
    return " <- ".join(frames[:3]) if frames else "?"


def report_site(out):
    """The first engine frames of the sanitizer report (after the injection's stack)."""
    m = re.search(r"==\d+==ERROR", out)
    i = m.start() if m else -1
    if i < 0:
        i = out.find("runtime error")
    frames = engine_frames(out[i:]) if i >= 0 else []
    return " <- ".join(frames[:3]) if frames else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=40.0, help="seconds per run")
    ap.add_argument("--scope", default="",
                    help="also fail libuv's and/or OpenSSL's allocations: uv, ssl, uv,ssl")
    ap.add_argument("--max-runs", type=int, default=250,
                    help="runs per case at most: a stride over N when A is larger")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    cases = [tuple(c.split(":", 1)) for c in (args.cases or CASES)]
    state = os.path.join(build, "torture-servers")
    logs = os.path.join(build, "torture-logs")
    os.makedirs(logs, exist_ok=True)
    env = dict(os.environ,
               TERN_TORTURE_SCOPE=args.scope,
               TERN_TEST_STATE=state,
               TERN_TEST_TMP=os.path.join(build, "torture-tmp"),
               # Unscaled waits: a case's own waits for progress (15 s) end as assertion
               # failures within the run's timeout, while a lost completion (test_run waits
               # 60 s) outlives it and counts as a hang.
               TERN_TEST_TIMEOUT_MULTIPLIER="1",
               ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=%d:"
                            "handle_abort=0:allocator_may_return_null=0" % EXIT_SANITIZER,
               LSAN_OPTIONS="exitcode=%d" % EXIT_SANITIZER,
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=%d" % EXIT_SANITIZER)
    servers = os.path.join(ROOT, "Tests", "TestServer", "servers.py")
    subprocess.run([sys.executable, servers, "start", state], check=True,
                   stdout=subprocess.DEVNULL)
    t0 = time.monotonic()
    defects = []
    try:
        defects = torture(build, cases, args, env, logs)
    finally:
        subprocess.run([sys.executable, servers, "stop", state], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    elapsed = time.monotonic() - t0
    if not defects:
        print("torture: no defect in %d cases (%.0fs)" % (len(cases), elapsed))
        return 0
    print("\ntorture: %d defective runs (%.0fs); by kind and site:" % (len(defects), elapsed))
    seen = {}
    for d in defects:
        seen.setdefault((d["kind"], d["site"]), []).append(d)
    for (kind, site), ds in seen.items():
        first = ds[0]
        print("\n  %s  (%d runs: %s)" % (kind, len(ds),
              ", ".join("%s N=%d" % (d["case"], d["n"]) for d in ds[:6]) + (", ..." if len(ds) > 6 else "")))
        print("    failing allocation: %s" % first["alloc"])
        print("    report: %s" % site)
        print("    log: %s" % first["log"])
    print("\nFAILED: the torture run found %d defect kinds/sites in %d runs" % (len(seen), len(defects)))
    return 1


def torture(build, cases, args, env, logs):
    defects = []
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
    # The counting runs first (in parallel), then every case's N runs in one queue.
    counts = {c: pool.submit(run, build, c[0], c[1], 0, args.timeout, env) for c in cases}
    jobs = []
    for c in cases:
        rc, out, secs = counts[c].result()
        a = calls_of(out)
        name = "%s:%s" % c
        if rc != 0 or a is None:
            kind, _ = classify(rc, out)
            path = os.path.join(logs, "%s.%s-count.log" % c)
            open(path, "w").write(out)
            print("%-56s fails WITHOUT injection (%s), log %s" % (name, kind or "exit %s" % rc, path))
            defects.append(dict(case=name, n=0, kind="fails without injection: %s" % kind,
                                site=report_site(out), alloc="-", log=path))
            continue
        stride = max(1, -(-a // args.max_runs))
        ns = list(range(1, a + 1, stride))
        print("%-56s A=%-5d runs=%-4d%s" % (name, a, len(ns),
              "" if stride == 1 else " (stride %d)" % stride), flush=True)
        for n in ns:
            jobs.append((c, n, pool.submit(run, build, c[0], c[1], n, args.timeout, env)))
    outcomes = {}
    seconds = {}
    for c, n, fut in jobs:
        rc, out, secs = fut.result()
        seconds["%s:%s" % c] = seconds.get("%s:%s" % c, 0.0) + secs
        kind, outcome = classify(rc, out)
        name = "%s:%s" % c
        calls = calls_of(out)
        if kind is None:
            if rc == 0 and calls is not None and calls < n:
                outcome = "allocation N not reached"
            outcomes.setdefault(name, {}).setdefault(outcome, 0)
            outcomes[name][outcome] += 1
            continue
        path = os.path.join(logs, "%s.%s-%d.log" % (c[0], c[1], n))
        open(path, "w").write(out)
        d = dict(case=name, n=n, kind=kind, site=report_site(out), alloc=alloc_site(out), log=path)
        defects.append(d)
        print("DEFECT %s N=%d: %s; failing allocation %s; report %s" %
              (name, n, kind, d["alloc"], d["site"]), flush=True)
    pool.shutdown()
    for name, o in outcomes.items():
        print("  %-54s %5.0fs  %s" % (name, seconds[name],
              ", ".join("%s %d" % kv for kv in sorted(o.items()))))
    return defects


if __name__ == "__main__":
    sys.exit(main())
