#!/usr/bin/env python3
"""tern-pac, the proxy auto-config evaluator (docs/pac.md), driven through its protocol.

Starts the program as a process and talks to it on stdin and stdout as the Swift layer does:
the helper functions under a fixed clock (TERN_PAC_NOW), time zone (TZ) and address
(TERN_PAC_MY_IP), scripts choosing per host and per URL, scripts that fail in every way, a
script that never returns (no answer: the test kills the process, as the parent does), a script
that allocates without end (ERR, and the process goes on), oversized input and EOF.

The binary: $TERN_PAC (CMake's ctest sets it), else build/release/tern-pac or SwiftPM's
.build/debug/tern-pac. Run: python3 Tests/PAC/test_pac.py [-v]
"""
import calendar
import json
import os
import select
import signal
import subprocess
import sys
import time
import unittest
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLOW = float(os.environ.get("TERN_TEST_TIMEOUT_MULTIPLIER", "1"))


def binary():
    path = os.environ.get("TERN_PAC")
    if path:
        return path
    for candidate in ("build/release/tern-pac", ".build/debug/tern-pac"):
        full = os.path.join(ROOT, candidate)
        if os.path.exists(full):
            return full
    raise unittest.SkipTest("no tern-pac binary (set TERN_PAC)")


def epoch(year, month, day, hour=0, minute=0, second=0):
    return calendar.timegm((year, month, day, hour, minute, second))


class Pac:
    """One tern-pac process."""

    def __init__(self, now=None, my_ip=None, tz="UTC", heap_limit=None):
        env = dict(os.environ)
        env["TZ"] = tz
        for name, value in (("TERN_PAC_NOW", now), ("TERN_PAC_MY_IP", my_ip),
                            ("TERN_PAC_HEAP_LIMIT", heap_limit)):
            env.pop(name, None)
            if value is not None:
                env[name] = str(value)
        self.proc = subprocess.Popen([binary()], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, bufsize=0)
        self.pending = b""

    def send(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def answer(self, timeout=10.0):
        """The next answer line without its newline, or None after `timeout` seconds."""
        deadline = time.monotonic() + timeout * SLOW
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError("tern-pac closed stdout (exit %r)" % self.proc.wait(10))
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def script(self, source, timeout=10.0):
        data = source.encode() if isinstance(source, str) else source
        self.send(b"SCRIPT %d\n" % len(data) + data)
        return self.answer(timeout)

    def find(self, url, host, timeout=10.0):
        self.send(("FIND %s %s\n" % (url, host)).encode())
        return self.answer(timeout)

    def close(self):
        """EOF on stdin; returns the exit status and stderr."""
        self.proc.stdin.close()
        code = self.proc.wait(30 * SLOW)
        err = self.proc.stderr.read().decode("utf-8", "replace")
        self.proc.stdout.close()
        self.proc.stderr.close()
        # Under ASan/UBSan (scripts/test.sh's sanitizer ctest run) a report fails the test.
        if "Sanitizer" in err or "runtime error:" in err:
            raise AssertionError("tern-pac's stderr has a sanitizer report:\n" + err)
        return code, err

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except BrokenPipeError:
                pass


# Evaluates the expression passed (URL-encoded) as the URL; answers its JSON.
EVAL_SCRIPT = """
function FindProxyForURL(url, host) {
  return JSON.stringify(eval(decodeURIComponent(url)));
}
"""


class Evaluator:
    """Evaluates helper calls in one tern-pac process: pac.eval("isPlainHostName('a')")."""

    def __init__(self, test, **env):
        self.test = test
        self.pac = Pac(**env)
        test.addCleanup(self.pac.kill)
        test.assertEqual(self.pac.script(EVAL_SCRIPT), "OK")

    def eval(self, expression):
        reply = self.pac.find(urllib.parse.quote(expression, safe=""), "h")
        self.test.assertIsNotNone(reply, expression)
        self.test.assertTrue(reply.startswith("OK "), "%s: %s" % (expression, reply))
        return json.loads(reply[3:])

    def check(self, cases):
        for expression, expected in cases:
            with self.test.subTest(expression=expression):
                self.test.assertEqual(self.eval(expression), expected, expression)


# Friday 15 March 2024, 14:30:45 UTC.
FRIDAY = epoch(2024, 3, 15, 14, 30, 45)
# Saturday 16 March 2024, 02:00:00 UTC: Friday 15 March, 21:00 in EST5 (UTC-5, no DST).
SATURDAY_EARLY = epoch(2024, 3, 16, 2, 0, 0)


class HostHelpers(unittest.TestCase):
    def test_names(self):
        Evaluator(self).check([
            ("isPlainHostName('www')", True),
            ("isPlainHostName('www.example.com')", False),
            ("isPlainHostName('')", True),
            ("dnsDomainIs('www.example.com', '.example.com')", True),
            ("dnsDomainIs('www.Example.COM', '.example.com')", True),
            ("dnsDomainIs('www', '.example.com')", False),
            ("dnsDomainIs('www.example.org', '.example.com')", False),
            ("dnsDomainIs('example.com', 'example.com')", True),
            ("localHostOrDomainIs('www.example.com', 'www.example.com')", True),
            ("localHostOrDomainIs('www', 'www.example.com')", True),
            ("localHostOrDomainIs('www.example.org', 'www.example.com')", False),
            ("localHostOrDomainIs('home.example.com', 'www.example.com')", False),
            ("localHostOrDomainIs('home', 'www.example.com')", False),
            ("dnsDomainLevels('www')", 0),
            ("dnsDomainLevels('www.example.com')", 2),
            ("dnsDomainLevels('a.b.c.d.')", 4),
        ])

    def test_dns(self):
        Evaluator(self).check([
            ("dnsResolve('localhost')", "127.0.0.1"),
            ("dnsResolve('127.0.0.1')", "127.0.0.1"),
            ("dnsResolve('10.1.2.3')", "10.1.2.3"),
            ("dnsResolve('')", None),
            ("dnsResolve('no-such-host.invalid')", None),
            ("dnsResolve('local\\u0000host')", None),
            ("isResolvable('localhost')", True),
            ("isResolvable('no-such-host.invalid')", False),
            ("isResolvable('')", False),
        ])

    def test_is_in_net(self):
        Evaluator(self).check([
            ("isInNet('10.1.2.3', '10.0.0.0', '255.0.0.0')", True),
            ("isInNet('11.1.2.3', '10.0.0.0', '255.0.0.0')", False),
            ("isInNet('192.168.1.77', '192.168.1.64', '255.255.255.192')", True),
            ("isInNet('192.168.1.80', '192.168.1.64', '255.255.255.240')", False),
            ("isInNet('192.168.1.79', '192.168.1.64', '255.255.255.240')", True),
            ("isInNet('255.255.255.255', '255.255.255.255', '255.255.255.255')", True),
            ("isInNet('1.2.3.4', '0.0.0.0', '0.0.0.0')", True),
            ("isInNet('1.2.3.4', '1.2.3.4', '255.255.255.255')", True),
            ("isInNet('1.2.3.5', '1.2.3.4', '255.255.255.255')", False),
            ("isInNet('localhost', '127.0.0.0', '255.0.0.0')", True),
            ("isInNet('localhost', '10.0.0.0', '255.0.0.0')", False),
            ("isInNet('no-such-host.invalid', '0.0.0.0', '0.0.0.0')", False),
            ("isInNet('1.2.3.4', '1.2.3', '255.0.0.0')", False),
            ("isInNet('1.2.3.4', '1.2.3.4', '256.0.0.0')", False),
        ])

    def test_my_ip_address(self):
        Evaluator(self, my_ip="10.9.8.7").check([
            ("myIpAddress()", "10.9.8.7"),
            ("isInNet(myIpAddress(), '10.9.0.0', '255.255.0.0')", True),
        ])
        # Without the override: some dotted quad (the route's source address or 127.0.0.1).
        address = Evaluator(self).eval("myIpAddress()")
        self.assertRegex(address, r"^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$")

    def test_sh_exp_match(self):
        Evaluator(self).check([
            ("shExpMatch('www.example.com', '*.example.com')", True),
            ("shExpMatch('example.com', '*.example.com')", False),
            ("shExpMatch('http://host/path/file.html', 'http://*/path/*')", True),
            ("shExpMatch('http://host/other/file.html', 'http://*/path/*')", False),
            ("shExpMatch('a.b', 'a?b')", True),
            ("shExpMatch('ab', 'a?b')", False),
            ("shExpMatch('axb', 'a.b')", False),  # the dot is a dot, not "any character"
            ("shExpMatch('a+b', 'a+b')", True),
            ("shExpMatch('aab', 'a+b')", False),
            ("shExpMatch('a(b)|c$', 'a(b)|c$')", True),
            ("shExpMatch('abc', 'a[bc]c')", True),
            ("shExpMatch('adc', 'a[bc]c')", False),
            ("shExpMatch('adc', 'a[!bc]c')", True),
            ("shExpMatch('abc', 'a[!bc]c')", False),
            ("shExpMatch('aQb', 'a[A-Z]b')", True),
            ("shExpMatch('a[b', 'a[b')", True),  # no closing bracket: a literal [
            ("shExpMatch('', '*')", True),
            ("shExpMatch('a', '')", False),
            ("shExpMatch('line\\none', 'line*one')", True),
            ("shExpMatch('ABC', 'abc')", False),
            ("shExpMatch('x.example.com.evil.org', '*.example.com')", False),
        ])


class DateTimeHelpers(unittest.TestCase):
    def test_weekday_range(self):
        Evaluator(self, now=FRIDAY).check([
            ("weekdayRange('FRI')", True),
            ("weekdayRange('fri')", True),
            ("weekdayRange('MON')", False),
            ("weekdayRange('MON', 'FRI')", True),
            ("weekdayRange('MON', 'THU')", False),
            ("weekdayRange('FRI', 'SUN')", True),
            ("weekdayRange('THU', 'MON')", True),  # wraps over the week end
            ("weekdayRange('SAT', 'THU')", False),  # wraps, and leaves Friday out
            ("weekdayRange('SAT', 'SAT')", False),
            ("weekdayRange('FRI', 'GMT')", True),
            ("weekdayRange('MON', 'FRI', 'GMT')", True),
            ("weekdayRange('FOO')", False),
            ("weekdayRange('MON', 'FOO')", False),
            ("weekdayRange()", False),
            ("weekdayRange('GMT')", False),
            ("weekdayRange('MON', 'TUE', 'WED')", False),
        ])

    def test_weekday_range_gmt(self):
        # Friday 21:00 local (EST5), Saturday 02:00 GMT.
        Evaluator(self, now=SATURDAY_EARLY, tz="EST5").check([
            ("weekdayRange('FRI')", True),
            ("weekdayRange('SAT')", False),
            ("weekdayRange('SAT', 'GMT')", True),
            ("weekdayRange('FRI', 'GMT')", False),
            ("weekdayRange('SAT', 'SUN', 'GMT')", True),
            ("weekdayRange('SAT', 'SUN')", False),
        ])

    def test_date_range(self):
        Evaluator(self, now=FRIDAY).check([
            # days
            ("dateRange(15)", True),
            ("dateRange('15')", True),
            ("dateRange(14)", False),
            ("dateRange(10, 20)", True),
            ("dateRange(16, 31)", False),
            ("dateRange(20, 10)", False),  # wraps: 20th..31st, 1st..10th
            ("dateRange(25, 15)", True),  # wraps, and ends on the 15th
            ("dateRange(15, 15)", True),
            # months
            ("dateRange('MAR')", True),
            ("dateRange('mar')", True),
            ("dateRange('APR')", False),
            ("dateRange('FEB', 'APR')", True),
            ("dateRange('APR', 'DEC')", False),
            ("dateRange('NOV', 'FEB')", False),
            ("dateRange('NOV', 'MAR')", True),  # wraps over the new year
            # years
            ("dateRange(2024)", True),
            ("dateRange(2023)", False),
            ("dateRange(2020, 2025)", True),
            ("dateRange(2025, 2030)", False),
            ("dateRange(2025, 2020)", False),  # years do not wrap
            # day and month
            ("dateRange(1, 'MAR', 31, 'MAR')", True),
            ("dateRange(15, 'MAR', 15, 'MAR')", True),
            ("dateRange(16, 'MAR', 14, 'MAR')", False),  # wraps, and leaves the 15th out
            ("dateRange(16, 'MAR', 15, 'MAR')", True),
            ("dateRange(1, 'DEC', 31, 'MAR')", True),  # over the new year
            ("dateRange(1, 'APR', 28, 'FEB')", False),
            ("dateRange(16, 'MAR', 1, 'JUN')", False),
            # month and year
            ("dateRange('FEB', 2024, 'APR', 2024)", True),
            ("dateRange('DEC', 2023, 'MAR', 2024)", True),
            ("dateRange('APR', 2023, 'FEB', 2024)", False),
            ("dateRange('APR', 2024, 'FEB', 2023)", False),
            # day, month and year
            ("dateRange(15, 'MAR', 2024, 15, 'MAR', 2024)", True),
            ("dateRange(1, 'JAN', 2024, 14, 'MAR', 2024)", False),
            ("dateRange(16, 'MAR', 2023, 15, 'MAR', 2024)", True),
            ("dateRange(16, 'MAR', 2023, 14, 'MAR', 2024)", False),
            ("dateRange(31, 'DEC', 2023, 1, 'JAN', 2025)", True),
            ("dateRange(15, 'MAR', 15, 'MAR', 'GMT')", True),
            # not a form
            ("dateRange()", False),
            ("dateRange('GMT')", False),
            ("dateRange(0)", False),
            ("dateRange('FOO')", False),
            ("dateRange(1, 2, 3)", False),
            ("dateRange(15, 'MAR', 2024)", False),
            ("dateRange(1, 'MAR')", False),  # a day to a month
            ("dateRange('MAR', 15, 'APR', 15)", False),
            ("dateRange(1, 2, 3, 4, 5, 6, 7, 8)", False),
            ("dateRange(1.5)", False),
        ])

    def test_date_range_gmt(self):
        # Friday 15 March 21:00 local (EST5), Saturday 16 March 02:00 GMT.
        Evaluator(self, now=SATURDAY_EARLY, tz="EST5").check([
            ("dateRange(15)", True),
            ("dateRange(16)", False),
            ("dateRange(16, 'GMT')", True),
            ("dateRange(15, 'GMT')", False),
            ("dateRange(16, 'MAR', 2024, 16, 'MAR', 2024, 'GMT')", True),
            ("dateRange(16, 'MAR', 2024, 16, 'MAR', 2024)", False),
        ])
        # New Year's Eve 23:30 local, New Year's Day GMT.
        Evaluator(self, now=epoch(2025, 1, 1, 4, 30), tz="EST5").check([
            ("dateRange(2024)", True),
            ("dateRange(2025, 'GMT')", True),
            ("dateRange('DEC')", True),
            ("dateRange('JAN', 'GMT')", True),
            ("dateRange('DEC', 'JAN')", True),
        ])

    def test_time_range(self):
        Evaluator(self, now=FRIDAY).check([
            ("timeRange(14)", True),
            ("timeRange('14')", True),
            ("timeRange(13)", False),
            ("timeRange(15)", False),
            ("timeRange(14, 15)", True),
            ("timeRange(13, 14)", False),  # up to 14:00, not through it
            ("timeRange(9, 17)", True),
            ("timeRange(15, 17)", False),
            ("timeRange(14, 14)", True),
            ("timeRange(22, 6)", False),
            ("timeRange(12, 2)", True),  # wraps around midnight
            ("timeRange(14, 30, 14, 30)", True),
            ("timeRange(14, 0, 14, 30)", True),
            ("timeRange(14, 31, 15, 0)", False),
            ("timeRange(8, 30, 14, 29)", False),
            ("timeRange(22, 0, 14, 31)", True),  # wraps
            ("timeRange(22, 0, 14, 29)", False),
            ("timeRange(14, 30, 45, 14, 30, 45)", True),
            ("timeRange(14, 30, 46, 15, 0, 0)", False),
            ("timeRange(14, 30, 0, 14, 30, 44)", False),
            ("timeRange(23, 0, 0, 14, 30, 45)", True),
            ("timeRange(0, 0, 0, 0, 0, 30)", False),
            ("timeRange(14, 'GMT')", True),
            ("timeRange(9, 17, 'GMT')", True),
            # not a form
            ("timeRange()", False),
            ("timeRange('GMT')", False),
            ("timeRange(24)", False),
            ("timeRange(1, 2, 3)", False),
            ("timeRange(14, 60, 15, 0)", False),
            ("timeRange(14, 0, 60, 15, 0, 0)", False),
            ("timeRange('two')", False),
            ("timeRange(-1, 23)", False),
            ("timeRange(14, -1, 15, 0)", False),
            ("timeRange(1, 2, 3, 4, 5, 6, 7)", False),
        ])

    def test_time_range_gmt_and_midnight(self):
        # 09:30:45 local (EST5), 14:30:45 GMT.
        Evaluator(self, now=FRIDAY, tz="EST5").check([
            ("timeRange(9)", True),
            ("timeRange(14)", False),
            ("timeRange(14, 'GMT')", True),
            ("timeRange(9, 'GMT')", False),
            ("timeRange(9, 30, 9, 31)", True),
            ("timeRange(9, 30, 9, 31, 'GMT')", False),
        ])
        # 15 seconds past midnight.
        Evaluator(self, now=epoch(2024, 3, 16, 0, 0, 15)).check([
            ("timeRange(0, 0, 0, 0, 0, 30)", True),
            ("timeRange(0, 0, 0, 0, 0, 30, 'GMT')", True),
            ("timeRange(0, 0, 16, 0, 0, 30)", False),
            ("timeRange(23, 1)", True),
            ("timeRange(23, 0)", False),
            ("timeRange(23, 59, 0, 0)", True),
            ("timeRange(23, 59, 59, 0, 0, 15)", True),
            ("timeRange(23, 59, 59, 0, 0, 14)", False),
        ])

    def test_real_clock(self):
        # Without TERN_PAC_NOW the clock is the real one: the current UTC hour matches.
        pac = Evaluator(self)
        hour = time.gmtime().tm_hour
        result = pac.eval("timeRange(%d, 'GMT')" % hour)
        if not result:  # the hour turned in between
            result = pac.eval("timeRange(%d, 'GMT')" % time.gmtime().tm_hour)
        self.assertTrue(result)


ROUTING_SCRIPT = r"""
function FindProxyForURL(url, host) {
  if (isPlainHostName(host) || dnsDomainIs(host, ".intranet.example"))
    return "DIRECT";
  if (isInNet(host, "10.0.0.0", "255.0.0.0"))
    return "DIRECT";
  if (shExpMatch(url, "https://*/secure/*"))
    return "HTTPS secure.example:443";
  if (url.substring(0, 4) == "ftp:")
    return "PROXY ftp-proxy.example:2121";
  if (isInNet(myIpAddress(), "192.168.0.0", "255.255.0.0"))
    return "PROXY home.example:3128; DIRECT";
  return "PROXY proxy.example:8080; SOCKS5 socks.example:1080; DIRECT";
}
"""


class Scripts(unittest.TestCase):
    def pac(self, **env):
        pac = Pac(**env)
        self.addCleanup(pac.kill)
        return pac

    def test_routing_per_host_and_url(self):
        pac = self.pac(my_ip="172.16.0.9")
        self.assertEqual(pac.script(ROUTING_SCRIPT), "OK")
        for url, host, expected in [
            ("http://wiki/", "wiki", "DIRECT"),
            ("http://a.intranet.example/x", "a.intranet.example", "DIRECT"),
            ("http://10.2.3.4/", "10.2.3.4", "DIRECT"),
            ("https://www.example.com/secure/login", "www.example.com",
             "HTTPS secure.example:443"),
            ("https://www.example.com/public/", "www.example.com",
             "PROXY proxy.example:8080; SOCKS5 socks.example:1080; DIRECT"),
            ("ftp://files.example.com/pub", "files.example.com", "PROXY ftp-proxy.example:2121"),
        ]:
            self.assertEqual(pac.find(url, host), "OK " + expected, url)
        # The same script where myIpAddress() is a home address.
        home = self.pac(my_ip="192.168.1.20")
        self.assertEqual(home.script(ROUTING_SCRIPT), "OK")
        self.assertEqual(home.find("http://www.example.com/", "www.example.com"),
                         "OK PROXY home.example:3128; DIRECT")
        code, _ = pac.close()
        self.assertEqual(code, 0)

    def test_failing_scripts(self):
        pac = self.pac()
        self.assertEqual(pac.find("http://a/", "a"), "ERR no script loaded")
        reply = pac.script("function FindProxyForURL(url, host) { return 'DIRECT' ")
        self.assertRegex(reply, r"^ERR SyntaxError")
        reply = pac.script("throw new Error('broken on purpose');")
        self.assertRegex(reply, r"^ERR .*broken on purpose")
        reply = pac.script("var x = 1;")
        self.assertEqual(reply, "ERR the script defines no FindProxyForURL function")
        reply = pac.script("var FindProxyForURL = 'DIRECT';")
        self.assertEqual(reply, "ERR the script defines no FindProxyForURL function")
        # After a failed SCRIPT no script is loaded, not even an earlier good one.
        self.assertEqual(pac.script("function FindProxyForURL() { return 'DIRECT'; }"), "OK")
        self.assertEqual(pac.find("http://a/", "a"), "OK DIRECT")
        self.assertRegex(pac.script("}"), r"^ERR SyntaxError")
        self.assertEqual(pac.find("http://a/", "a"), "ERR no script loaded")
        code, _ = pac.close()
        self.assertEqual(code, 0)

    def test_failing_calls(self):
        pac = self.pac()
        self.assertEqual(pac.script(r"""
            function FindProxyForURL(url, host) {
              switch (host) {
                case 'throw': throw new TypeError('no proxy for ' + host);
                case 'throw-string': throw 'just a string';
                case 'undefined': return undefined;
                case 'null': return null;
                case 'number': return 42;
                case 'boolean': return true;
                case 'object': return { proxy: 'DIRECT' };
                case 'string-object': return new String('DIRECT');
                case 'lines': return 'PROXY a:1;\r\nPROXY b:2;\nDIRECT\r';
                case 'empty': return '';
                case 'big': return new Array(65537).join('x');
                case 'too-big': return new Array(65538).join('x');
                case 'args': return url + '|' + host;
                case 'replace': FindProxyForURL = 7; return 'DIRECT';
              }
              return 'DIRECT';
            }"""), "OK")
        self.assertEqual(pac.find("http://x/", "throw"),
                         "ERR FindProxyForURL threw: TypeError: no proxy for throw")
        self.assertEqual(pac.find("http://x/", "throw-string"),
                         "ERR FindProxyForURL threw: just a string")
        for host, kind in (("undefined", "undefined"), ("null", "null"), ("number", "a number"),
                           ("boolean", "a boolean"), ("object", "an object"),
                           ("string-object", "an object")):
            self.assertEqual(pac.find("http://x/", host),
                             "ERR FindProxyForURL returned %s, not a string" % kind)
        self.assertEqual(pac.find("http://x/", "lines"), "OK PROXY a:1;  PROXY b:2; DIRECT ")
        self.assertEqual(pac.find("http://x/", "empty"), "OK ")
        self.assertEqual(pac.find("http://x/", "big"), "OK " + "x" * 65536)
        self.assertEqual(pac.find("http://x/", "too-big"),
                         "ERR FindProxyForURL returned 65537 bytes, more than 65536")
        self.assertEqual(pac.find("http://x:8/a?b=c#d", "args"), "OK http://x:8/a?b=c#d|args")
        self.assertEqual(pac.find("http://x/", "replace"), "OK DIRECT")
        self.assertEqual(pac.find("http://x/", "a"), "ERR FindProxyForURL is no longer a function")
        code, _ = pac.close()
        self.assertEqual(code, 0)

    def test_script_replaced(self):
        pac = self.pac()
        counting = "var n = 0; function FindProxyForURL() { n++; return 'PROXY a:' + n; }"
        self.assertEqual(pac.script(counting), "OK")
        self.assertEqual(pac.find("http://x/", "x"), "OK PROXY a:1")
        self.assertEqual(pac.find("http://x/", "x"), "OK PROXY a:2")  # state lives between calls
        # A fresh heap: the old script's globals are gone.
        self.assertEqual(pac.script("function FindProxyForURL() { return typeof n; }"), "OK")
        self.assertEqual(pac.find("http://x/", "x"), "OK undefined")
        # A script cannot spoil the helpers for the next one.
        self.assertEqual(pac.script("isPlainHostName = null;"
                                    "function FindProxyForURL() { return 'x'; }"), "OK")
        self.assertEqual(pac.script("function FindProxyForURL(u, h) {"
                                    "  return String(isPlainHostName(h)); }"), "OK")
        self.assertEqual(pac.find("http://x/", "x"), "OK true")
        code, _ = pac.close()
        self.assertEqual(code, 0)

    def test_alert_goes_to_stderr(self):
        pac = self.pac()
        self.assertEqual(pac.script("alert('loading');"
                                    "function FindProxyForURL(u, h) {"
                                    "  alert('for ' + h); return 'DIRECT'; }"), "OK")
        self.assertEqual(pac.find("http://x/", "example.com"), "OK DIRECT")
        code, err = pac.close()
        self.assertEqual(code, 0)
        self.assertIn("alert: loading\n", err)
        self.assertIn("alert: for example.com\n", err)

    def test_script_that_never_returns(self):
        # FIND never answers: the parent's only way out is to kill the process.
        pac = self.pac()
        self.assertEqual(pac.script("function FindProxyForURL() { for (;;) {} }"), "OK")
        started = time.monotonic()
        self.assertIsNone(pac.find("http://x/", "x", timeout=1.0))
        self.assertGreaterEqual(time.monotonic() - started, 0.9)
        self.assertIsNone(pac.proc.poll())  # still running, still looping
        pac.proc.send_signal(signal.SIGKILL)
        self.assertEqual(pac.proc.wait(10), -signal.SIGKILL)
        # The same at the top level of the script.
        top = self.pac()
        self.assertIsNone(top.script("while (true) {}", timeout=1.0))
        top.proc.kill()
        self.assertEqual(top.proc.wait(10), -signal.SIGKILL)

    def test_script_that_allocates_without_end(self):
        pac = self.pac(heap_limit=48 * 1024 * 1024)
        self.assertEqual(pac.script(r"""
            function FindProxyForURL(url, host) {
              var keep = [];
              var big = new Array(10001).join('x');
              if (host == 'strings') for (var i = 0; ; i++) keep.push(big + i);
              if (host == 'doubling') { var s = 'xy'; for (;;) s += s; }
              if (host == 'objects') for (;;) keep.push({ a: keep.length, b: [1, 2, 3] });
              return 'DIRECT';
            }"""), "OK")
        for host in ("strings", "doubling", "objects"):
            reply = pac.find("http://x/", host, timeout=60)
            self.assertIsNotNone(reply, host)
            self.assertRegex(reply, r"^ERR FindProxyForURL threw: (RangeError|Error)", host)
        # The heap is still good: the garbage was collected.
        self.assertEqual(pac.find("http://x/", "x"), "OK DIRECT")
        # At the top level of a script.
        reply = pac.script("var keep = [], big = new Array(10001).join('x');"
                           "for (;;) keep.push(big + keep.length);", timeout=60)
        self.assertRegex(reply, r"^ERR the script threw: (RangeError|Error)")
        self.assertEqual(pac.script("function FindProxyForURL() { return 'DIRECT'; }"), "OK")
        self.assertEqual(pac.find("http://x/", "x"), "OK DIRECT")
        code, err = pac.close()
        self.assertEqual(code, 0, err)

    def test_default_heap_limit(self):
        # The default bound (256 MiB) holds too: ERR, not a crash or a machine out of memory.
        pac = self.pac()
        self.assertEqual(pac.script("function FindProxyForURL() {"
                                    "  var s = 'xy'; for (;;) s += s; }"), "OK")
        reply = pac.find("http://x/", "x", timeout=120)
        self.assertRegex(reply or "", r"^ERR FindProxyForURL threw: (RangeError|Error)")
        code, err = pac.close()
        self.assertEqual(code, 0, err)


class Protocol(unittest.TestCase):
    def pac(self, **env):
        pac = Pac(**env)
        self.addCleanup(pac.kill)
        return pac

    def test_unknown_and_malformed_requests(self):
        pac = self.pac()
        for line in (b"HELLO\n", b"\n", b"find http://x/ x\n", b"SCRIPT\n", b"FIND\n",
                     b"\x00\xff\n"):
            pac.send(line)
            self.assertEqual(pac.answer(), "ERR unknown request", line)
        for line in (b"SCRIPT abc\n", b"SCRIPT -1\n", b"SCRIPT 1x\n", b"SCRIPT \n",
                     b"SCRIPT 99999999999999999999999\n"):
            pac.send(line)
            self.assertEqual(pac.answer(), "ERR usage: SCRIPT <nbytes>", line)
        for line in (b"FIND http://x/\n", b"FIND \n", b"FIND http://x/ \n", b"FIND  x\n"):
            pac.send(line)
            self.assertEqual(pac.answer(), "ERR usage: FIND <url> <host>", line)
        # CRLF line ends are accepted.
        self.assertEqual(pac.script("function FindProxyForURL(u, h) { return u + ' ' + h; }"), "OK")
        pac.send(b"FIND http://x/ x\r\n")
        self.assertEqual(pac.answer(), "OK http://x/ x")
        # Several requests at once: as many answers, in order.
        pac.send(b"FIND http://a/ a\nBAD\nFIND http://b/ b\n")
        self.assertEqual([pac.answer(), pac.answer(), pac.answer()],
                         ["OK http://a/ a", "ERR unknown request", "OK http://b/ b"])
        self.assertEqual(pac.close()[0], 0)

    def test_empty_script(self):
        pac = self.pac()
        self.assertEqual(pac.script(""), "ERR the script defines no FindProxyForURL function")
        self.assertEqual(pac.close()[0], 0)

    def test_script_bytes_are_exact(self):
        # The script's length decides, whatever the bytes (newlines, "FIND" lines) inside.
        pac = self.pac()
        source = "function FindProxyForURL() {\nreturn 'A';\n}\n//\nFIND http://x/ x\n"
        self.assertEqual(pac.script("/*" + source + "*/" + source.replace("FIND", "//FIND")), "OK")
        self.assertEqual(pac.find("http://x/", "x"), "OK A")
        self.assertEqual(pac.close()[0], 0)

    def test_long_lines(self):
        pac = self.pac()
        self.assertEqual(pac.script("function FindProxyForURL(u, h) {"
                                    "  return String(u.length); }"), "OK")
        # 65536 bytes of line: the limit, accepted.
        url = "http://x/" + "a" * (65536 - len("FIND http://x/ x") )
        self.assertEqual(len(("FIND %s x" % url)), 65536)
        self.assertEqual(pac.find(url, "x"), "OK %d" % len(url))
        # One byte more: refused, read to its end, and the next request is fine.
        self.assertEqual(pac.find(url + "a", "x"),
                         "ERR request line too long (more than 65536 bytes)")
        pac.send(b"Z" * 1000000 + b"\n")
        self.assertEqual(pac.answer(), "ERR request line too long (more than 65536 bytes)")
        self.assertEqual(pac.find("http://x/", "x"), "OK 9")
        self.assertEqual(pac.close()[0], 0)

    def test_script_size_limit(self):
        pac = self.pac()
        body = b"function FindProxyForURL() { return 'BIG'; }\n"
        # Exactly 16 MiB: accepted.
        script = body + b"//" + b"x" * (16 * 1024 * 1024 - len(body) - 3) + b"\n"
        self.assertEqual(len(script), 16 * 1024 * 1024)
        self.assertEqual(pac.script(script, timeout=60), "OK")
        self.assertEqual(pac.find("http://x/", "x"), "OK BIG")
        # One byte more: ERR, the bytes skipped, the loaded script kept.
        self.assertEqual(pac.script(script + b"\n", timeout=60),
                         "ERR script too large (more than 16777216 bytes)")
        self.assertEqual(pac.find("http://x/", "x"), "OK BIG")
        self.assertEqual(pac.close()[0], 0)

    def test_eof(self):
        # EOF between requests: exit 0.
        pac = self.pac()
        self.assertEqual(pac.close(), (0, ""))
        # EOF inside a script: exit 0 without an answer.
        pac = self.pac()
        pac.send(b"SCRIPT 100\nfunction")
        self.assertEqual(pac.close()[0], 0)
        # EOF after a request without its newline: answered, then exit 0.
        pac = self.pac()
        pac.send(b"HELLO")
        pac.proc.stdin.close()
        self.assertEqual(pac.answer(), "ERR unknown request")
        self.assertEqual(pac.proc.wait(30), 0)
        # EOF while a script is loaded.
        pac = self.pac()
        self.assertEqual(pac.script("function FindProxyForURL() { return 'DIRECT'; }"), "OK")
        self.assertEqual(pac.close()[0], 0)


if __name__ == "__main__":
    unittest.main()
