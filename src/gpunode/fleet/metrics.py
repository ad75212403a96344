"""The engines' and the router's Prometheus text, read into what `inv status` shows.

vLLM serves /metrics on its API port by default (`vllm:` names); SGLang does with
--enable-metrics (`sglang:` names, which the plan always passes); the router (sglang-router
0.3, `smg_` names) on --prometheus-host/--prometheus-port, 127.0.0.1:29000 in the plan.
Requests running and queued are gauges; tokens/s comes from two samples of the generation
counter (SGLang also keeps its own gen_throughput gauge, used when there is one sample).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_LINE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')

Labels = tuple[tuple[str, str], ...]


def parse(text: str) -> dict[str, list[tuple[Labels, float]]]:
    """Prometheus text exposition -> {metric name: [(labels, value)]}; comments and lines that
    are not samples are read past (a metrics page cut short loses only its last line)."""
    out: dict[str, list[tuple[Labels, float]]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        try:
            value = float(m["value"])
        except ValueError:
            continue
        labels = tuple(_LABEL.findall(m["labels"] or ""))
        out.setdefault(m["name"], []).append((labels, value))
    return out


def total(samples: dict[str, list[tuple[Labels, float]]], *names: str) -> float | None:
    """The sum over every label set of the first of `names` present (engines renamed metrics
    between versions; several engine processes or tp ranks each report their own)."""
    for name in names:
        if name in samples:
            values = [v for _, v in samples[name] if not math.isnan(v)]
            return sum(values)
    return None


@dataclass(frozen=True)
class Load:
    """One server's or the router's load as its metrics say."""

    running: float | None = None        # requests being decoded now
    queued: float | None = None         # requests waiting for a slot
    generated: float | None = None      # generation tokens since start (counter)
    throughput: float | None = None     # the engine's own tokens/s gauge (SGLang)
    kv_usage: float | None = None       # KV cache use, 0..1

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


# Per engine: the metric names of each field, newest first.
_NAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {"running": ("vllm:num_requests_running",), "queued": ("vllm:num_requests_waiting",),
             "generated": ("vllm:generation_tokens_total",), "throughput": (),
             "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")},
    "sglang": {"running": ("sglang:num_running_reqs",), "queued": ("sglang:num_queue_reqs",),
               "generated": ("sglang:generation_tokens_total",), "throughput": ("sglang:gen_throughput",),
               "kv_usage": ("sglang:token_usage",)},
}


def engine_family(engine: str) -> str:
    return "sglang" if engine.startswith("sglang") else "vllm"


def server_load(text: str, engine: str) -> Load:
    samples = parse(text)
    names = _NAMES[engine_family(engine)]
    return Load(**{field: total(samples, *names[field]) for field in names})


def router_load(text: str) -> Load:
    """The router's in-flight requests: its age histogram of requests in flight, summed."""
    samples = parse(text)
    return Load(running=total(samples, "smg_http_inflight_request_age_count"))


def router_worker_health(text: str) -> dict[str, bool]:
    """worker url -> healthy, from the router's smg_worker_health gauge."""
    out = {}
    for labels, value in parse(text).get("smg_worker_health", []):
        url = dict(labels).get("worker")
        if url:
            out[url] = value >= 1
    return out


def rate(first: float | None, second: float | None, seconds: float) -> float | None:
    """Tokens/s between two readings of a counter; None when either is missing, the interval
    is empty, or the counter went back (the server restarted between the samples)."""
    if first is None or second is None or seconds <= 0 or second < first:
        return None
    return (second - first) / seconds
