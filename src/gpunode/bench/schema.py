"""The results document of `inv bench` (docs/bench.md, "Results file"), loading and comparing.

`schema` is "gpunode.bench/<major>"; a reader refuses another major version instead of
misreading it. Summaries are kept next to the raw per-request records they were computed
from, so a result can be recomputed (and is, by the unit tests) with a newer gpunode.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpunode import userfiles
from gpunode.bench.inputs import BenchInputError

SCHEMA = "gpunode.bench/1"
TOP_KEYS = ("schema", "created", "gpunode", "target", "engine", "pinset", "model", "client", "settings", "runs")
RUN_KEYS = ("phase", "concurrency", "in_flight", "wall_s", "warmup_errors", "total", "endpoints")


def load(path: Path) -> dict[str, Any]:
    """A results file, checked: its schema's major version, and the keys every reader needs."""
    if not path.exists():
        raise BenchInputError(f"{path} does not exist", hint="give a file that `inv bench` saved")
    text = userfiles.read_text(path, what="bench results file", error=BenchInputError)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BenchInputError(f"{path} is not JSON ({exc})", hint="give a file that `inv bench` saved") from None
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if not isinstance(schema, str) or not schema.startswith("gpunode.bench/"):
        raise BenchInputError(f"{path} is not a gpunode bench result (schema {str(schema)[:40]!r})",
                              hint="give a file that `inv bench` saved")
    if schema != SCHEMA:
        raise BenchInputError(f"{path} has schema {schema}; this gpunode reads {SCHEMA}",
                              hint="compare it with the gpunode release that wrote it, or bench again")
    missing = [k for k in TOP_KEYS if k not in doc] + sorted(
        {k for run in doc.get("runs") or [] for k in RUN_KEYS if k not in run})
    if missing or not isinstance(doc.get("runs"), list):
        raise BenchInputError(f"{path} lacks {', '.join(missing) or 'a list of runs'}",
                              hint="the file was cut or edited; bench again")
    return doc


def rows(doc: dict[str, Any]) -> dict[tuple[str, int, str], dict[str, Any]]:
    """(phase, concurrency, endpoint) -> that endpoint's summary, plus '(total)' per step."""
    out: dict[tuple[str, int, str], dict[str, Any]] = {}
    for run in doc["runs"]:
        for name, ep in run["endpoints"].items():
            out[(run["phase"], run["concurrency"], name)] = ep["summary"]
        out[(run["phase"], run["concurrency"], "(total)")] = run["total"]
    return out


COMPARED_SETTINGS = ("prompts", "input_len", "output_len", "requests_per_server", "temperature", "ignore_eos")


def compare(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Row by row: output tok/s and p50 TTFT/latency, old -> new, and the change in %.

    Settings that differ are listed first: a faster run with shorter replies is no news.
    """
    differ = [f"{k}: {old['settings'].get(k)!r} -> {new['settings'].get(k)!r}" for k in COMPARED_SETTINGS
              if old["settings"].get(k) != new["settings"].get(k)]
    for k in ("engine", "pinset", "model"):
        if old.get(k) != new.get(k):
            differ.append(f"{k}: {old.get(k)!r} -> {new.get(k)!r}")
    a, b = rows(old), rows(new)
    table = []
    for key in sorted(set(a) & set(b), key=lambda k: (k[0], k[1], k[2] == "(total)", k[2])):
        row: dict[str, Any] = {"phase": key[0], "concurrency": key[1], "endpoint": key[2]}
        for metric, pick in (("output_tok_s", lambda s: s["output_tok_s"]),
                             ("ttft_p50_s", lambda s: (s.get("ttft_s") or {}).get("p50")),
                             ("latency_p50_s", lambda s: (s.get("latency_s") or {}).get("p50"))):
            before, after = pick(a[key]), pick(b[key])
            change = (after - before) / before * 100 if before and after is not None else None
            row[metric] = {"old": before, "new": after, "change_pct": change}
        row["errors"] = {"old": a[key]["errors"], "new": b[key]["errors"]}
        table.append(row)
    only = sorted(set(a) ^ set(b))
    return {"old": old["created"], "new": new["created"], "settings_differ": differ, "rows": table,
            "unmatched": [f"{p} c={c} {e}" for p, c, e in only]}
