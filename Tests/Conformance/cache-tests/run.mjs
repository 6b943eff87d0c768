// The cache-tests conformance runner: the public cache-tests corpus (github.com/http-tests/
// cache-tests, BSD-3-Clause) driven through `tern --cache DIR` in its private-cache (browser)
// mode. The corpus is used where it lies (not copied): its server's handlers answer each case
// on a loopback port in this process, and its own client (test-engine/client: runner.mjs,
// test.mjs) runs the cases and decides pass or fail, with the global `fetch` replaced by
// `ternFetch` below, which runs one `tern` process per request. So the rules are the corpus's;
// this file only translates a fetch() call into tern's flags and tern's output into a Response.
//
// Usage: node run.mjs [--id TEST_ID] [--out DIR] [--chunk N]
//   --id     run one test and print its requests and responses (the corpus's dump)
//   --out    where results/tern.json and RESULTS.md go (default: next to this file)
//   --chunk  tests run at once (default 25, the corpus's own; a test's requests run in order)
// Environment: CACHE_TESTS_DIR (the corpus; default the vendored Tests/Conformance/cache-tests/corpus, relative to
// the repository), TERN (the binary; default .build/debug/tern).
// Exit status: 0, or 1 when a test that checks a response must not be reused failed (see
// mustNotReuse), or 2 when the run itself could not be done.

import { execFile } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, '../../..')
const args = process.argv.slice(2)
function option (name, fallback) {
  const i = args.indexOf(name)
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback
}
const onlyId = option('--id', '')
const outDir = path.resolve(option('--out', here))
const chunkSize = parseInt(option('--chunk', '25'))
const corpus = path.resolve(process.env.CACHE_TESTS_DIR || path.join(root, 'Tests/Conformance/cache-tests/corpus'))
const tern = path.resolve(process.env.TERN || path.join(root, '.build/debug/tern'))

for (const [what, p] of [['the cache-tests corpus (set CACHE_TESTS_DIR)', path.join(corpus, 'tests/index.mjs')], ['the tern binary (set TERN)', tern]]) {
  if (!fs.existsSync(p)) {
    console.error(`cache-tests: ${what} not found at ${p}`)
    process.exit(2)
  }
}
const load = rel => import(pathToFileURL(path.join(corpus, rel)).href)

// ---------------------------------------------------------------------------------------------
// The corpus's server: its config, test and state handlers, dispatched as its server.mjs does,
// bound to 127.0.0.1 on a free port (server.mjs listens on every interface and writes a pid file).
const { default: handleConfig } = await load('test-engine/server/handle-config.mjs')
const { default: handleTest } = await load('test-engine/server/handle-test.mjs')
const { default: handleState } = await load('test-engine/server/handle-state.mjs')
const server = http.createServer((request, response) => {
  const url = new URL(request.url, 'http://127.0.0.1/')
  const pathSegs = url.pathname.split('/')
  pathSegs.shift()
  const dispatch = pathSegs.shift()
  if (dispatch === 'config') handleConfig(pathSegs, request, response)
  else if (dispatch === 'test') handleTest(pathSegs, request, response)
  else if (dispatch === 'state') handleState(pathSegs, request, response)
  else { response.writeHead(404); response.end() }
})
await new Promise((resolve, reject) => {
  server.once('error', reject)
  server.listen(0, '127.0.0.1', resolve)
})
const baseUrl = `http://127.0.0.1:${server.address().port}`

// ---------------------------------------------------------------------------------------------
// fetch() through tern. Requests to the test paths go through `tern --cache DIR` (one cache
// folder per test, named by its Test-ID); the client's own bookkeeping (PUT /config, GET
// /state) goes through Node's fetch, as with the corpus's CLI.
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'tern-cache-tests-'))
fs.mkdirSync(path.join(work, 'caches'))
const nodeFetch = globalThis.fetch
let sequence = 0

function headerList (headers) {
  if (headers === undefined) return []
  if (Array.isArray(headers)) return headers.map(([n, v]) => [String(n), String(v)])
  if (typeof headers.entries === 'function') return Array.from(headers.entries())
  return Object.entries(headers)
}

// The response heads tern wrote with -D: interim (1xx) heads, redirects' heads, the final one.
function parseHeads (text) {
  const heads = []
  for (const block of text.split('\r\n\r\n')) {
    const lines = block.split('\r\n').filter(line => line !== '')
    if (lines.length === 0 || !lines[0].startsWith('HTTP/')) continue
    const m = /^HTTP\/[0-9.]+ ([0-9]{3})(?: (.*))?$/.exec(lines[0])
    if (!m) continue
    const fields = []
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':')
      if (colon > 0) fields.push([line.slice(0, colon).trim(), line.slice(colon + 1).trim()])
    }
    heads.push({ status: parseInt(m[1]), statusText: m[2] || '', fields })
  }
  return heads
}

function ternResponse (url, head, body, redirected) {
  const headers = new Headers()
  for (const [name, value] of head.fields) {
    try { headers.append(name, value) } catch { /* a value fetch() would refuse: left out */ }
  }
  return {
    status: head.status,
    statusText: head.statusText,
    ok: head.status >= 200 && head.status < 300,
    redirected,
    type: 'basic',
    url,
    headers,
    text: async () => body,
    json: async () => JSON.parse(body)
  }
}

async function ternFetch (input, init = {}) {
  const url = String(input)
  if (!url.startsWith(`${baseUrl}/test/`)) return nodeFetch(input, init)
  const fields = headerList(init.headers)
  const testId = (fields.find(([n]) => n.toLowerCase() === 'test-id') || [])[1] || 'unknown'
  const method = (init.method || 'GET').toUpperCase()
  const cacheMode = init.cache || 'default'
  const n = ++sequence
  const headFile = path.join(work, `${n}.head`)
  const bodyFile = path.join(work, `${n}.body`)
  const argv = ['-s', '-D', headFile, '-o', bodyFile]
  // Fetch's cache modes (https://fetch.spec.whatwg.org/#http-network-or-cache-fetch):
  // "no-store" bypasses the cache; it and "no-cache" add request fields when none is set.
  const has = name => fields.some(([n]) => n.toLowerCase() === name)
  if (cacheMode === 'no-store' || cacheMode === 'reload') {
    if (!has('pragma')) fields.push(['Pragma', 'no-cache'])
    if (!has('cache-control')) fields.push(['Cache-Control', 'no-cache'])
  } else if (cacheMode === 'no-cache') {
    if (!has('cache-control')) fields.push(['Cache-Control', 'max-age=0'])
  } else if (cacheMode !== 'default') {
    throw new TypeError(`cache mode ${cacheMode} has no tern equivalent`)
  }
  if (cacheMode !== 'no-store') {
    argv.push('--cache', path.join(work, 'caches', testId.replace(/[^A-Za-z0-9._-]/g, '_')))
  }
  if (method === 'HEAD') argv.push('-I')
  else if (method !== 'GET' || init.body !== undefined) argv.push('-X', method)
  if ((init.redirect || 'follow') === 'follow') argv.push('-L')
  for (const [name, value] of fields) argv.push('-H', value === '' ? `${name};` : `${name}: ${value}`)
  if (init.body !== undefined && init.body !== null) {
    const requestBody = path.join(work, `${n}.request`)
    fs.writeFileSync(requestBody, String(init.body))
    if (!has('content-type')) argv.push('-H', 'Content-Type: text/plain;charset=UTF-8')
    argv.push('--data-binary', `@${requestBody}`)
  }
  argv.push(url)

  const exitCode = await new Promise((resolve, reject) => {
    execFile(tern, argv, { signal: init.signal }, (error) => {
      if (error && error.name === 'AbortError') reject(error)
      else resolve(error ? (typeof error.code === 'number' ? error.code : -1) : 0)
    })
  })
  const read = file => { try { return fs.readFileSync(file, 'utf8') } catch { return '' } }
  const heads = parseHeads(read(headFile))
  const body = read(bodyFile)
  for (const f of [headFile, bodyFile]) fs.rmSync(f, { force: true })
  const finals = heads.filter(h => h.status >= 200)
  if (exitCode !== 0 || finals.length === 0) {
    throw new TypeError(`fetch failed (tern exited with ${exitCode})`)
  }
  return ternResponse(url, finals[finals.length - 1], body, finals.length > 1)
}
globalThis.fetch = ternFetch

// ---------------------------------------------------------------------------------------------
// Run the corpus's client over its tests in browser mode (private cache).
const { default: testSuites } = await load('tests/index.mjs')
const { runTests, getResults } = await load('test-engine/client/runner.mjs')
const { determineTestResult } = await load('test-engine/lib/results.mjs')

let suitesToRun = testSuites
if (onlyId) {
  suitesToRun = []
  for (const suite of testSuites) {
    for (const test of suite.tests) {
      if (test.id === onlyId) {
        test.dump = true
        suitesToRun.push({ ...suite, tests: [test] })
      }
    }
  }
  if (suitesToRun.length === 0) {
    console.error(`cache-tests: no test ${onlyId}`)
    process.exit(2)
  }
}
const started = Date.now()
try {
  await runTests(suitesToRun, true, baseUrl, chunkSize)
} catch (err) {
  console.error(`cache-tests: the run failed: ${err.stack || err}`)
  process.exit(2)
} finally {
  server.close()
  server.closeAllConnections()
  fs.rmSync(work, { recursive: true, force: true })
}
const seconds = Math.round((Date.now() - started) / 1000)
const results = getResults()

if (onlyId) {
  const r = results[onlyId]
  console.log(`${onlyId}: ${determineTestResult(testSuites, onlyId, results, false)[2]} ${r === true ? '' : JSON.stringify(r)}`)
  process.exit(0)
}

// ---------------------------------------------------------------------------------------------
// Results: tern.json in the corpus's results format, RESULTS.md beside the browsers' results.
const applicable = [] // the tests the corpus's client runs in browser mode
for (const suite of testSuites) {
  for (const test of suite.tests) {
    if (test.cdn_only === true || test.browser_skip === true) continue
    applicable.push({ suite, test })
  }
}
const notApplicable = testSuites.reduce((n, s) => n + s.tests.length, 0) - applicable.length

// A test that checks a response must NOT be reused: a required test (not `optimal`, not a
// `check`) with a request that is not setup and expects the cache to go to the server, either
// unconditionally (`not_cached`) or to revalidate (`etag_validated`, `lm_validated`).
function mustNotReuse (test) {
  if (test.kind !== undefined && test.kind !== 'required') return false
  return test.requests.some(r => r.setup !== true &&
    ['not_cached', 'etag_validated', 'lm_validated'].includes(r.expected_type))
}

const browsers = [['Chrome', 'chrome'], ['Firefox', 'firefox'], ['Safari', 'safari']]
  .map(([name, file]) => ({ name, results: JSON.parse(fs.readFileSync(path.join(corpus, 'results', `${file}.json`), 'utf8')) }))
const columns = [{ name: 'Tern', results }, ...browsers]

const symbolNames = {
  '✅': 'pass', '⛔️': 'fail', '⚠️': 'optional fail', Y: 'check: yes', N: 'check: no',
  '🔹': 'setup fail', '⁉️': 'harness fail', '⚪️': 'dependency fail', '↻': 'retry', '-': 'untested'
}
function outcome (res, id) { return determineTestResult(testSuites, id, res)[2] }
function totals (res) {
  const t = { pass: 0, fail: 0, symbols: {}, mnrFail: [] }
  for (const { test } of applicable) {
    const r = res[test.id]
    if (r === true) t.pass++
    else t.fail++
    const s = outcome(res, test.id)
    t.symbols[s] = (t.symbols[s] || 0) + 1
    if (mustNotReuse(test) && r !== true) t.mnrFail.push(test.id)
  }
  return t
}
const sums = columns.map(c => ({ ...c, t: totals(c.results) }))
const mnrCount = applicable.filter(({ test }) => mustNotReuse(test)).length

fs.mkdirSync(path.join(outDir, 'results'), { recursive: true })
fs.writeFileSync(path.join(outDir, 'results', 'tern.json'), JSON.stringify(results, null, 2) + '\n')

// Failures grouped by cause: causes.json (hand-kept, test id -> cause) names known causes;
// the rest are grouped by the kind of assertion that failed.
let causes = {}
try { causes = JSON.parse(fs.readFileSync(path.join(here, 'causes.json'), 'utf8')) } catch {}
function messageKind (r) {
  const msg = Array.isArray(r) ? r[1] || '' : String(r)
  if (/does not come from cache/.test(msg)) return 'not reused when it could have been'
  if (/comes from cache/.test(msg)) return 'reused when it must not be'
  if (/should have been conditional|doesn't have if-/.test(msg)) return 'not revalidated with a conditional request'
  if (/^Request /.test(msg)) return 'request fields differ'
  if (/header .* is|header not present|unexpected header/.test(msg)) return 'response fields differ'
  if (/fetch failed/.test(msg)) return 'tern failed the transfer'
  if (/status is/.test(msg)) return 'status differs'
  if (/body is/.test(msg)) return 'body differs'
  return 'other'
}
const cell = s => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ')
const pct = (a, b) => `${(100 * a / b).toFixed(1)}%`
const md = []
md.push('# cache-tests: Tern\'s private cache next to the browsers\'')
md.push('')
md.push('Generated by `scripts/check-cache-conformance.sh` (Tests/Conformance/cache-tests/run.mjs): the')
md.push('[cache-tests](https://github.com/http-tests/cache-tests) corpus (BSD-3-Clause, Mark Nottingham')
md.push('and contributors) in its browser (private cache) mode, each request one `tern --cache DIR`')
md.push('run (one cache folder per test), pass or fail decided by the corpus\'s own client. Chrome,')
md.push('Firefox and Safari are the corpus\'s published results (`results/*.json`) on the same tests.')
md.push('Per-test results: `results/tern.json` (the corpus\'s format). One test by itself, with its')
md.push('requests and responses: `scripts/check-cache-conformance.sh --id TEST_ID`.')
md.push('')
md.push(`## Totals (${applicable.length} tests apply to a private cache; ${notApplicable} are for shared caches or CDNs only, or skipped in browser mode)`)
md.push('')
md.push('| | pass | fail | pass rate | must-not-reuse failures (of ' + mnrCount + ') |')
md.push('|---|---:|---:|---:|---:|')
for (const c of sums) md.push(`| ${c.name} | ${c.t.pass} | ${c.t.fail} | ${pct(c.t.pass, applicable.length)} | ${c.t.mnrFail.length} |`)
md.push('')
md.push('"pass" counts the results that are `true` (the corpus\'s `check` tests included, as the')
md.push('issue counts Firefox\'s 207 of 300). "Must-not-reuse" tests are the required tests with a')
md.push('request that expects the server to see it (`not_cached`) or a revalidation (`etag_validated`,')
md.push('`lm_validated`); the test suite fails when Tern fails one of them.')
md.push('')
md.push('By the corpus\'s classification (dependencies honoured, as on cache-tests.fyi):')
md.push('')
const symbols = Object.keys(symbolNames).filter(s => sums.some(c => c.t.symbols[s]))
md.push('| | ' + symbols.map(s => `${s} ${symbolNames[s]}`).join(' | ') + ' |')
md.push('|---|' + symbols.map(() => '---:').join('|') + '|')
for (const c of sums) md.push(`| ${c.name} | ` + symbols.map(s => c.t.symbols[s] || 0).join(' | ') + ' |')
md.push('')
md.push('## By suite (pass / tests)')
md.push('')
md.push('| suite | tests | ' + columns.map(c => c.name).join(' | ') + ' |')
md.push('|---|---:|' + columns.map(() => '---:').join('|') + '|')
for (const suite of testSuites) {
  const tests = applicable.filter(a => a.suite === suite)
  if (tests.length === 0) continue
  md.push(`| ${suite.name} | ${tests.length} | ` + columns.map(c => tests.filter(({ test }) => c.results[test.id] === true).length).join(' | ') + ' |')
}
md.push('')
md.push('## Tern\'s failures by cause')
md.push('')
md.push('Causes come from `causes.json` (test id -> cause, kept by hand); the others are grouped by')
md.push('the kind of check that failed. MNR marks a must-not-reuse test.')
md.push('')
const groups = new Map()
for (const { test } of applicable) {
  const r = results[test.id]
  if (r === true) continue
  const cause = causes[test.id] || `unclassified: ${messageKind(r)}`
  if (!groups.has(cause)) groups.set(cause, [])
  groups.get(cause).push(test)
}
if (groups.size === 0) md.push('None.')
for (const [cause, tests] of [...groups.entries()].sort((a, b) => b[1].length - a[1].length)) {
  md.push(`### ${cause} (${tests.length})`)
  md.push('')
  for (const test of tests) {
    const r = results[test.id]
    const msg = Array.isArray(r) ? `${r[0]}: ${r[1]}` : String(r)
    const others = browsers.map(b => `${b.name} ${outcome(b.results, test.id)}`).join(', ')
    md.push(`- \`${test.id}\`${mustNotReuse(test) ? ' (MNR)' : ''} ${outcome(results, test.id)} ${cell(msg)} (${others})`)
  }
  md.push('')
}
md.push('## Every applicable test')
md.push('')
md.push('| test | kind | ' + columns.map(c => c.name).join(' | ') + ' |')
md.push('|---|---|' + columns.map(() => ':-:').join('|') + '|')
for (const { test } of applicable) {
  md.push(`| \`${test.id}\`${mustNotReuse(test) ? ' (MNR)' : ''} | ${test.kind || 'required'} | ` + columns.map(c => outcome(c.results, test.id)).join(' | ') + ' |')
}
md.push('')
fs.writeFileSync(path.join(outDir, 'RESULTS.md'), md.join('\n'))

const mine = sums[0].t
console.log(`cache-tests: ${mine.pass} of ${applicable.length} pass (${pct(mine.pass, applicable.length)}), ` +
  `${mine.fail} fail, ${notApplicable} not applicable; ` +
  browsers.map((b, i) => `${b.name} ${sums[i + 1].t.pass}`).join(', ') + `; ${seconds} s`)
console.log(`cache-tests: must-not-reuse tests: ${mnrCount}, failed: ${mine.mnrFail.length}`)
for (const id of mine.mnrFail) {
  const r = results[id]
  console.log(`  FAIL ${id}: ${Array.isArray(r) ? r.join(': ') : r}`)
}
process.exit(mine.mnrFail.length > 0 ? 1 : 0)
