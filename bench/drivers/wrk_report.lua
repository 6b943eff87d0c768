-- Used by bench/drivers/wrk: prints wrk's summary as the driver contract's result line, plus
-- the error count on a line of its own (the wrapper strips it). done() runs once, after the run,
-- so it costs wrk nothing per request.
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("elapsed_s=%.6f requests=%d bytes=%d\n",
    summary.duration / 1e6, summary.requests, summary.bytes))
  io.write(string.format("wrk_errors=%d\n",
    e.connect + e.read + e.write + e.status + e.timeout))
end
