"""Statistics of one benchmark step from its per-request records (pure, tested on recorded runs).

A record is [start_s, ttft_s, latency_s, output_tokens, prompt_tokens, error] (client.py).
Throughput counts the output tokens of good requests over the endpoint's busy window: from the
first request's start to the last one's end, so idle time before or after is not counted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

PERCENTILES = (50, 90, 99)
Record = Sequence[Any]


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), so p50 of [1, 2] is 1.5."""
    if not values:
        return math.nan
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def spread(values: Sequence[float]) -> dict[str, float | None]:
    """mean and p50/p90/p99; None (JSON null) where there is no value to take them of."""
    if not values:
        return {"mean": None, **{f"p{p}": None for p in PERCENTILES}}
    return {"mean": sum(values) / len(values), **{f"p{p}": percentile(values, p) for p in PERCENTILES}}


def window(records: Sequence[Record]) -> float:
    if not records:
        return 0.0
    return max(r[0] + r[2] for r in records) - min(r[0] for r in records)


def endpoint_summary(records: Sequence[Record]) -> dict[str, Any]:
    good = [r for r in records if not r[5]]
    errors = [r[5] for r in records if r[5]]
    seconds = window(records)
    out_tokens = sum(int(r[3]) for r in good)
    # Time per output token after the first: the decode speed one request sees.
    tpot = [(r[2] - r[1]) / (r[3] - 1) for r in good if r[3] > 1 and r[1] >= 0]
    return {
        "requests": len(records),
        "ok": len(good),
        "errors": len(errors),
        "error_samples": sorted(set(errors))[:5],
        "output_tokens": out_tokens,
        "prompt_tokens": sum(int(r[4]) for r in good),
        "duration_s": seconds,
        "output_tok_s": out_tokens / seconds if seconds > 0 else 0.0,
        "requests_s": len(good) / seconds if seconds > 0 else 0.0,
        "ttft_s": spread([r[1] for r in good if r[1] >= 0]),
        "latency_s": spread([r[2] for r in good]),
        "tpot_s": spread(tpot),
    }


def step_total(per_endpoint: dict[str, Sequence[Record]]) -> dict[str, Any]:
    """Every endpoint of a step together: tokens of all over the window that holds them all."""
    every = [r for recs in per_endpoint.values() for r in recs]
    summary = endpoint_summary(every)
    return {k: summary[k] for k in ("requests", "ok", "errors", "output_tokens", "duration_s", "output_tok_s",
                                    "requests_s")}
