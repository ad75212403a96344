"""The job's ETA from a benchmark: samples x output tokens / the measured output rate.

Which measurement: the step with no errors and the highest total output tok/s (the job is
run at the concurrency that serves it fastest); the result says which one it took, so the
number can be checked and repeated.
"""

from __future__ import annotations

from typing import Any

from gpunode.bench.inputs import BenchInputError


def eta_seconds(samples: int, output_tokens: float, rate_tok_s: float) -> float:
    if rate_tok_s <= 0:
        raise BenchInputError("no measured output rate to estimate from (0 tok/s)",
                              hint="look at the errors of the benchmark above")
    return samples * output_tokens / rate_tok_s


def best_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    clean = [r for r in runs if r["total"]["errors"] == 0 and r["total"]["output_tok_s"] > 0]
    if not clean:
        raise BenchInputError("every benchmark step had errors; an ETA from them would be wrong",
                              hint="fix the errors shown (or lower --concurrency), then run again")
    return max(clean, key=lambda r: r["total"]["output_tok_s"])


def estimate(runs: list[dict[str, Any]], samples: int, output_tokens: float, bench_output_len: int | None,
             source: str = "") -> dict[str, Any]:
    run = best_run(runs)
    rate = run["total"]["output_tok_s"]
    seconds = eta_seconds(samples, output_tokens, rate)
    notes = []
    if bench_output_len and not 0.5 <= output_tokens / bench_output_len <= 2:
        notes.append(f"measured with {bench_output_len}-token replies, the job's are {output_tokens:g}: decode gets "
                     f"slower as contexts grow, so bench with --output-len {round(output_tokens)} for a faithful ETA")
    return {"samples": samples, "output_tokens_per_sample": output_tokens, "source": source,
            "total_output_tokens": samples * output_tokens, "rate_tok_s": rate, "seconds": seconds,
            "days": seconds / 86400,
            "measurement": {"phase": run["phase"], "concurrency": run["concurrency"],
                            "in_flight": run["in_flight"], "output_tok_s": rate},
            "notes": notes}


def duration(seconds: float) -> str:
    """A duration as people say it: '16.5 days', '7.2 h', '12 min', '40 s'."""
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def sentence(eta: dict[str, Any]) -> str:
    m = eta["measurement"]
    where = {"router": "through the router", "fleet": "through the fleet router"}.get(m["phase"],
                                                                                      "to every server at once")
    return (f"ETA {duration(eta['seconds'])}: {eta['samples']:,} samples x {eta['output_tokens_per_sample']:,.0f} "
            f"output tokens = {eta['total_output_tokens']:,.0f} tokens at {eta['rate_tok_s']:,.0f} tok/s "
            f"(measured {where}, concurrency {m['concurrency']} per server, {m['in_flight']} in flight)")
