"""The bounded search of `inv tune`, apart from where it runs: a Bed (the lab's or a node's systemd
test bed, tune/bed.py; the lent GPU's shim, tests/device/tune_proof.py) prepares a candidate (the
resolver's plan, then the engine's own argument checks) and measures it (start, Ready, the job's
bench, memory); this module decides what to try, keeps to the budget and picks the winner.

The search is one knob at a time (coordinate descent): the planned flags are measured first, then
each value of the first knob on top of them; the best so far is the base of the next knob. Knobs the
table orders first (the ones that change the most) are tried first, so a budget cut keeps them.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from gpunode.tune.rules import Knob

SCHEMA = "gpunode-tune/1"
# a first start nobody has timed yet: what a candidate is assumed to cost before one was measured
FIRST_GUESS_S = 60.0
# Faster by less than this is not faster: two starts of one command line differ by about 1% on a lent H100
# (tests/data/device/h100-tune: 4611 and 4656 tok/s for command lines SGLang resolves alike).
MARGIN = 0.03


@dataclass
class Candidate:
    n: int
    label: str                       # "as planned", "max_num_seqs=4", "mtp=false, mem_fraction=0.8"
    overrides: dict[str, Any]        # inventory variables on top of the target's own
    knob: str = ""
    value: Any = None
    status: str = "planned"          # planned | measured | refused | failed | skipped | same (as an earlier row)
    why: str = ""                    # the refusal, the failure, or why it was skipped
    argv: list[str] = field(default_factory=list)   # the test bed's command line
    output_tok_s: float | None = None
    ttft_p50_ms: float | None = None
    latency_p50_s: float | None = None
    requests: int | None = None
    errors: int | None = None
    start_to_ready_s: float | None = None
    memory_bytes: int | None = None
    memory_what: str = ""
    wall_s: float | None = None
    restarted: bool = True           # False: measured as it already ran (the planned flags, on a live server)

    @property
    def ok(self) -> bool:
        return self.status == "measured" and self.output_tok_s is not None and not self.errors


class Bed(Protocol):
    def prepare(self, overrides: dict[str, Any]) -> tuple[list[str], str]:
        """The test bed's command line for these variables, and "" or why it cannot run: the resolver's
        refusal (gpunode's rule) or the engine's own argument checks' (its message)."""

    def measure(self, cand: Candidate, deadline_s: float) -> dict[str, Any]:
        """Start the candidate (or read the planned server as it runs, cand.n == 0), wait until Ready
        within deadline_s, bench it with the job's shape, record memory and start-to-ready; the fields of
        Candidate it measured. Raises on a failed start or bench (its message becomes the row's why)."""


@dataclass
class Result:
    rows: list[Candidate]
    budget_s: float
    search_s: float
    stopped_by_budget: bool
    winner: Candidate | None
    margin: float = 0.0

    def best(self) -> Candidate | None:
        return self.winner


def label(overrides: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in overrides.items()) or "as planned"


def plan_candidates(knobs: list[Knob], concurrency: int, extra_args: tuple[str, ...],
                    base: dict[str, Any] | None = None) -> list[tuple[Knob | None, Any, dict[str, Any]]]:
    """The first pass as `--check` shows it: the planned flags, then each knob's values on top of them."""
    base = dict(base or {})
    out: list[tuple[Knob | None, Any, dict[str, Any]]] = [(None, None, base)]
    for k in knobs:
        for raw in k.values:
            value = k.value(raw, concurrency)
            out.append((k, value, {**base, **k.overrides(value, extra_args)}))
    return out


def _fit(row: Candidate, got: dict[str, Any]) -> None:
    for key, value in got.items():
        if hasattr(row, key):
            setattr(row, key, value)


def search(bed: Bed, knobs: list[Knob], *, concurrency: int, budget_s: float, extra_args: tuple[str, ...] = (),
           say: Callable[[str], None] = print, clock: Callable[[], float] = time.monotonic,
           first_guess_s: float = FIRST_GUESS_S, earlier: list[Candidate] | None = None,
           margin: float = MARGIN) -> Result:
    """earlier: rows of a run cut off before (the same target and job): a candidate with the same
    variables is taken from them instead of measured again (the device proof runs in calls of 10 minutes).
    margin: a candidate replaces the best so far only when it is faster by more than this fraction; less is
    run-to-run noise, and the flags found first (the plan's own, then the earlier knobs') stay."""
    t0 = clock()
    rows: list[Candidate] = []
    tried: dict[str, Candidate] = {}
    kept = {json.dumps(r.overrides, sort_keys=True): r for r in (earlier or []) if r.status != "skipped"}
    total = 1 + sum(len(k.values) for k in knobs)
    costs: list[float] = []
    stopped = False

    def left() -> float:
        return budget_s - (clock() - t0)

    def estimate() -> float:
        return max(costs) if costs else first_guess_s

    def one(knob: Knob | None, value: Any, overrides: dict[str, Any]) -> Candidate:
        nonlocal stopped
        key = json.dumps(overrides, sort_keys=True)
        if key in tried:
            return tried[key]
        row = Candidate(len(rows), label(overrides), dict(overrides), knob.id if knob else "", value)
        rows.append(row)
        tried[key] = row
        if key in kept:
            old = kept[key]
            _fit(row, {k: v for k, v in asdict(old).items() if k not in ("n", "label", "overrides", "knob", "value")})
            row.why = (row.why + "; " if row.why else "") + "measured by an earlier run (kept)"
            say(f"[{len(rows)}/{total}] {row.label}: {row.status} earlier ({row.output_tok_s} tok/s)")
            return row
        if stopped:
            row.status, row.why = "skipped", "the budget was spent"
            return row
        row.argv, refusal = bed.prepare(overrides)
        twin = next((r for r in rows[:-1] if r.argv and r.argv == row.argv and r.status != "same"), None)
        if twin is not None and not refusal:
            # another way of writing a command line already tried (mtp: true where auto turns it on already)
            _fit(row, {k: v for k, v in asdict(twin).items() if k not in ("n", "label", "overrides", "knob", "value",
                                                                         "status", "why")})
            row.status, row.why = "same", f"the same command line as #{twin.n} ({twin.label})"
            say(f"[{len(rows)}/{total}] {row.label}: {row.why}")
            return row
        if refusal:
            row.status, row.why = "refused", refusal
            say(f"[{len(rows)}/{total}] {row.label}: refused: {refusal.splitlines()[0][:200]}")
            return row
        need = estimate() if rows and len(rows) > 1 else 0.0  # the planned flags are always measured
        if need > left():
            stopped = True
            row.status = "skipped"
            row.why = f"the budget was spent: {max(left(), 0):.0f} s left, a candidate takes about {need:.0f} s"
            say(f"[{len(rows)}/{total}] {row.label}: skipped ({row.why})")
            return row
        started = clock()
        try:
            _fit(row, bed.measure(row, max(left(), 1.0)))
            row.status = "measured"
        except Exception as exc:  # a start that fails is a result, not the end of the search
            row.status, row.why = "failed", str(exc).strip().splitlines()[0][:500] if str(exc).strip() else repr(exc)
        row.wall_s = round(clock() - started, 1)
        if row.restarted:
            costs.append(row.wall_s)
        done = sum(1 for r in rows if r.status in ("measured", "failed"))
        eta = min(max(left(), 0.0), estimate() * max(total - len(rows), 0))
        figures = (f"{row.output_tok_s:.1f} tok/s, ready in {row.start_to_ready_s} s" if row.status == "measured"
                   else f"failed: {row.why[:200]}")
        say(f"[{len(rows)}/{total}] {row.label}: {figures}; {done} run, about {eta:.0f} s left "
            f"(budget {max(left(), 0):.0f} s)")
        if left() <= 0:
            stopped = True
        return row

    best = one(None, None, {})
    for knob in knobs:
        base = best
        for raw in knob.values:
            value = knob.value(raw, concurrency)
            row = one(knob, value, {**base.overrides, **knob.overrides(value, _args(base.overrides, extra_args))})
            if row.ok and (not best.ok or (row.output_tok_s or 0) > (best.output_tok_s or 0) * (1 + margin)):
                best = row
    measured = [r for r in rows if r.ok]
    winner = best if best.ok else (max(measured, key=lambda r: (r.output_tok_s or 0, -r.n)) if measured else None)
    return Result(rows, budget_s, round(clock() - t0, 1), stopped, winner, margin)


def _args(overrides: dict[str, Any], extra_args: tuple[str, ...]) -> tuple[str, ...]:
    import shlex

    given = overrides.get("extra_args")
    return tuple(shlex.split(given)) if isinstance(given, str) else extra_args


def document(result: Result, knobs: list[Knob], about: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """The saved table: what was tuned where, with which job, every candidate, and the winner."""
    return {"schema": SCHEMA, "created": datetime.now(UTC).isoformat(timespec="seconds"), **about, "job": job,
            "budget_s": result.budget_s, "margin": result.margin, "search_s": result.search_s,
            "stopped_by_budget": result.stopped_by_budget,
            "knobs": [{"id": k.id, "values": list(k.values), "variable": k.variable, "flag": k.flag, "why": k.why,
                       "source": k.source} for k in knobs],
            "candidates": [asdict(r) for r in result.rows],
            "winner": result.winner.n if result.winner else None}


COLUMNS = ("n", "label", "status", "output_tok_s", "ttft_p50_ms", "latency_p50_s", "errors", "start_to_ready_s",
           "memory_bytes", "memory_what", "wall_s", "why")


def csv_text(doc: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([*COLUMNS, "winner"])
    for row in doc["candidates"]:
        w.writerow([*(row.get(c) if row.get(c) is not None else "" for c in COLUMNS), row["n"] == doc["winner"]])
    return buf.getvalue()


def load(path: Path) -> list[Candidate]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return [Candidate(**row) for row in doc.get("candidates", [])]


def plot(doc: dict[str, Any], path: Path) -> str | None:
    """Output tok/s per candidate (the winner marked), with start-to-ready beside it; None when drawn,
    else why not (matplotlib missing: the `plot` extra)."""
    from gpunode.bench.plot import MISSING

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return MISSING.replace("inv bench --against RESULTS.json --plot FILE.png",
                               "inv tune --against TABLE.json --plot FILE.png")
    rows = [r for r in doc["candidates"] if r["status"] == "measured"]
    fig, ax = plt.subplots(figsize=(8, 0.5 * max(len(rows), 2) + 1.5))
    names = [r["label"] for r in rows]
    speeds = [r["output_tok_s"] or 0 for r in rows]
    colors = ["tab:green" if r["n"] == doc["winner"] else "tab:blue" for r in rows]
    ax.barh(names, speeds, color=colors)
    for i, r in enumerate(rows):
        mem = f", {r['memory_bytes'] / 2**30:.1f} GiB" if r.get("memory_bytes") else ""
        ready = f"ready {r['start_to_ready_s']} s" if r.get("start_to_ready_s") is not None else "as running"
        ax.text(speeds[i], i, f" {ready}{mem}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("output tokens/s (the job's shape, the test bed server)")
    job = doc["job"]
    ax.set_title(f"{doc.get('target')}: {doc.get('model')} on {doc.get('engine')} {doc.get('engine_version')}, "
                 f"c={job.get('concurrency')} in {job.get('input_len')} / out {job.get('output_len')}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def figures(doc: dict[str, Any]) -> dict[str, Any]:
    """A candidate's figures from a bench results document (one servers step: the test bed alone)."""
    run = next(r for r in doc["runs"] if r["phase"] == "servers")
    ep = next(iter(run["endpoints"].values()))["summary"]
    ttft = (ep.get("ttft_s") or {}).get("p50")
    lat = (ep.get("latency_s") or {}).get("p50")
    return {"output_tok_s": round(float(run["total"]["output_tok_s"]), 2),
            "ttft_p50_ms": round(ttft * 1000, 1) if ttft is not None else None,
            "latency_p50_s": round(lat, 3) if lat is not None else None,
            "requests": run["total"]["requests"], "errors": run["total"]["errors"]}
