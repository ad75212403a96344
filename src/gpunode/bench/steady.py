"""A steady, bounded load through an endpoint while something else happens (a rolling upgrade), and
the latency of the requests that started inside and outside given time spans (issue 39).

The client (client.py's paced mode) runs on the target as `inv bench` runs it; it stops when its
stop file appears. Its records' start times are relative to its own start, whose wall-clock time it
reports (`t0_wall`), so spans measured by the caller's clock (time.time(), the same host clock in a
container) split them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpunode.bench import stats
from gpunode.bench.runner import Endpoint, Layout, Spec, client_request


def request(lay: Layout, endpoint: Endpoint, *, rate: float, max_in_flight: int, stop_file: str,
            duration_s: float = 900, output_len: int = 16, input_len: int = 32) -> dict[str, Any]:
    """The client's stdin for `rate` requests a second through `endpoint` until `stop_file` exists."""
    spec = Spec(concurrency=[max_in_flight], input_len=input_len, output_len=output_len, timeout_s=120)
    req = client_request(spec, lay, "steady", [(endpoint, max_in_flight, 256)])
    ep = req["endpoints"][0]
    del ep["requests"], ep["concurrency"]
    ep.update({"rate": rate, "max_in_flight": max_in_flight, "stop_file": stop_file, "duration_s": duration_s})
    return req


def split(raw: dict[str, Any], spans: Sequence[tuple[float, float]]) -> dict[str, dict[str, Any]]:
    """The records of a steady run -> {"steady": ..., "during": ...}: requests that started inside one
    of `spans` (wall-clock start, end) and the others, each with its count, errors and latency spread."""
    t0 = raw["t0_wall"]
    rows = [r for recs in raw["endpoints"].values() for r in recs]

    def inside(r: Sequence[Any]) -> bool:
        start = t0 + r[0]
        return any(a <= start <= b for a, b in spans)

    out = {}
    for name, part in (("steady", [r for r in rows if not inside(r)]), ("during", [r for r in rows if inside(r)])):
        good = [r for r in part if not r[5]]
        out[name] = {"requests": len(part), "failed": len(part) - len(good),
                     "failures": sorted({r[5] for r in part if r[5]})[:5],
                     "latency_s": stats.spread([r[2] for r in good])}
    return out


def line(name: str, part: dict[str, Any]) -> str:
    """One line of the figures: `during upgrade: 61 requests, 0 failed, p50 0.21 s, p99 0.94 s`."""
    lat = part["latency_s"]
    p50, p99 = lat["p50"], lat["p99"]
    figures = f", p50 {p50:.3f} s, p99 {p99:.3f} s" if p50 is not None and p99 is not None else ""
    return f"{name}: {part['requests']} requests, {part['failed']} failed{figures}"
