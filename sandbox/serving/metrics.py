"""Aggregating request results into the serving metrics, and reading a server's Prometheus page.

Definitions follow vLLM's ``benchmark_serving`` / AIPerf so numbers are comparable with theirs:
request throughput = completed requests / wall time of the level; output-token throughput = sum
of output tokens / wall time; goodput = requests that met *every* SLO / wall time; ITL
percentiles are taken over all inter-event gaps of all requests. Latencies are in milliseconds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .client import RequestResult

PERCENTILES = (50, 90, 95, 99)


@dataclass(frozen=True)
class Slo:
    """Per-request limits in milliseconds for goodput; ``None`` means no limit on that metric."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def met_by(self, r: RequestResult) -> bool:
        if not r.ok:
            return False
        if self.ttft_ms is not None and (r.ttft_s is None or r.ttft_s * 1e3 > self.ttft_ms):
            return False
        tpot = r.tpot_s
        if self.tpot_ms is not None and tpot is not None and tpot * 1e3 > self.tpot_ms:
            return False
        if self.e2e_ms is not None and (r.e2e_s is None or r.e2e_s * 1e3 > self.e2e_ms):
            return False
        return True


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method), without numpy."""
    if not values:
        return float("nan")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def distribution(values_s: list[float]) -> dict:
    """mean and p50/p90/p95/p99 in milliseconds (NaN-free: an empty list gives ``None``s)."""
    if not values_s:
        return {"n": 0, "mean": None, **{f"p{q}": None for q in PERCENTILES}}
    ms = [v * 1e3 for v in values_s]
    return {"n": len(ms), "mean": sum(ms) / len(ms), **{f"p{q}": percentile(ms, q) for q in PERCENTILES}}


def aggregate(results: list[RequestResult], duration_s: float, slo: Slo | None = None) -> dict:
    ok = [r for r in results if r.ok]
    failed = [r for r in results if not r.ok]
    errors: dict[str, int] = {}
    for r in failed:
        key = (r.error or "unknown error")[:160]
        errors[key] = errors.get(key, 0) + 1
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.input_tokens or 0 for r in ok)
    requested = sum(r.requested_tokens for r in ok)
    good = sum(1 for r in ok if (slo or Slo()).met_by(r))
    dur = max(duration_s, 1e-9)
    return {
        "completed": len(ok),
        "failed": len(failed),
        "errors": dict(sorted(errors.items(), key=lambda kv: -kv[1])[:5]),
        "duration_s": duration_s,
        "req_s": len(ok) / dur,
        "out_tok_s": out_tokens / dur,
        "total_tok_s": (out_tokens + in_tokens) / dur,
        "goodput_req_s": good / dur,
        "slo_attainment": good / len(results) if results else 0.0,
        "input_tokens": in_tokens,
        "output_tokens": out_tokens,
        "out_len_ratio": out_tokens / requested if requested else None,
        "usage_reported": all(r.usage_reported for r in ok) if ok else False,
        "ttft_ms": distribution([r.ttft_s for r in ok if r.ttft_s is not None]),
        "tpot_ms": distribution([t for t in (r.tpot_s for r in ok) if t is not None]),
        "itl_ms": distribution([x for r in ok for x in r.itl_s]),
        "e2e_ms": distribution([r.e2e_s for r in ok if r.e2e_s is not None]),
    }


# --- Prometheus ---------------------------------------------------------------------------
# Gauges and counters that tell *why* a configuration is slow, under the names vLLM (v0 and v1),
# SGLang, llama.cpp's server (``--metrics``) and the bundled tiny server use. Several label sets
# (DP ranks, engines) are summed.
SERVER_SIGNALS = {
    "queued": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "tiny:num_requests_waiting",
               "llamacpp:requests_deferred"),
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs", "tiny:num_requests_running",
                "llamacpp:requests_processing"),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
                 "tiny:kv_cache_usage_perc"),
    "preemptions": ("vllm:num_preemptions_total", "vllm:num_preemptions", "tiny:num_preemptions_total"),
}
COUNTERS = {"preemptions"}
_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+([^\s]+)")


def parse_prometheus(text: str) -> dict[str, float]:
    """Sum of every sample per metric name (labels collapsed); unparseable lines are skipped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if math.isnan(value):
            continue
        out[m.group(1)] = out.get(m.group(1), 0.0) + value
    return out


def server_signals(samples: dict[str, float]) -> dict[str, float]:
    """Map one scrape onto the four signal names; absent ones are left out (not zero)."""
    out = {}
    for signal, names in SERVER_SIGNALS.items():
        for name in names:
            if name in samples:
                out[signal] = samples[name]
                break
    return out


def summarize_scrapes(scrapes: list[dict[str, float]]) -> dict[str, float]:
    """Gauges: mean and max over the run; counters: increase from the first to the last scrape."""
    out: dict[str, float] = {}
    if not scrapes:
        return out
    for signal in SERVER_SIGNALS:
        vals = [s[signal] for s in scrapes if signal in s]
        if not vals:
            continue
        if signal in COUNTERS:
            out[signal] = max(0.0, vals[-1] - vals[0])
        else:
            out[signal] = sum(vals) / len(vals)
            out[f"{signal}_max"] = max(vals)
    out["scrapes"] = float(len(scrapes))
    return out
