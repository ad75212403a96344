"""Throughput vs concurrency as a PNG. matplotlib is optional (`pip install 'gpunode[plot]'`):
without it, plot() says so and the benchmark's JSON is unaffected."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MISSING = ("matplotlib is not installed, so no plot was drawn; install it with "
           "`pip install 'gpunode[plot]'` (or `pip install matplotlib`) and re-draw from the saved results "
           "with `inv bench --against RESULTS.json --plot FILE.png`")


def series(doc: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """Line name -> [(concurrency per server, output tok/s)]: each phase's total, and each server."""
    out: dict[str, list[tuple[int, float]]] = {}
    for run in doc["runs"]:
        out.setdefault(f"{run['phase']} total", []).append((run["concurrency"], run["total"]["output_tok_s"]))
        if run["phase"] == "servers" and len(run["endpoints"]) > 1:
            for name, ep in run["endpoints"].items():
                out.setdefault(name, []).append((run["concurrency"], ep["summary"]["output_tok_s"]))
    return {k: sorted(v) for k, v in out.items()}


def plot(doc: dict[str, Any], path: Path) -> str | None:
    """Draw the PNG; returns None when done, else the reason it was not (matplotlib missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return MISSING
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, points in series(doc).items():
        style = "-o" if name.endswith("total") else "--."
        ax.plot([p[0] for p in points], [p[1] for p in points], style, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrency per server")
    ax.set_ylabel("output tokens/s")
    s = doc["settings"]
    ax.set_title(f"{doc['target']}: {doc['model']} on {doc['engine']}, in {s['input_len']} / out {s['output_len']}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None
