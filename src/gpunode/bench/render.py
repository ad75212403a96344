"""What `inv bench` prints: a bar per step while it runs, then tables of the results."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpunode.bench.eta import sentence


class StepBars:
    """Callable(done, total, label) from the client's progress lines; done(run) after each step."""

    def __init__(self, console: Console):
        self.console = console
        self._progress: Progress | None = None
        self._tasks: dict[str, Any] = {}

    def __call__(self, done: int, total: int, label: str) -> None:
        if self._progress is None:
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("requests"), TimeElapsedColumn(), console=self.console,
                                      transient=True)
            self._progress.start()
        if label not in self._tasks:
            self._tasks[label] = self._progress.add_task(f"bench {label}", total=total)
        self._progress.update(self._tasks[label], completed=done, total=total)

    def done(self, run: dict[str, Any]) -> None:
        t = run["total"]
        text = (f"{run['phase']} c={run['concurrency']}: {t['output_tok_s']:,.0f} output tok/s, "
                f"{t['ok']}/{t['requests']} requests ok")
        (self._progress.console if self._progress else self.console).print(text, markup=False, highlight=False)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _ms(spread: dict[str, Any], key: str) -> str:
    value = spread.get(key)
    return "-" if value is None else f"{value * 1000:,.0f}"


def results(console: Console, doc: dict[str, Any]) -> None:
    s = doc["settings"]
    size = f"in {s['input_len']} tok" if s["input_len"] else s["prompts"]
    table = Table(title=f"{doc['target']}: {doc['model']} on {doc['engine']} ({size}, out {s['output_len']} tok)")
    for col in ("phase", "c", "endpoint", "ok/req", "err", "out tok/s",
                "TTFT ms p50/p90/p99", "latency ms p50/p90/p99"):
        table.add_column(col, justify="left" if col in ("phase", "endpoint") else "right")
    for run in doc["runs"]:
        for name, ep in run["endpoints"].items():
            e = ep["summary"]
            table.add_row(run["phase"], str(run["concurrency"]), name, f"{e['ok']}/{e['requests']}", str(e["errors"]),
                          f"{e['output_tok_s']:,.0f}",
                          "/".join(_ms(e["ttft_s"], k) for k in ("p50", "p90", "p99")),
                          "/".join(_ms(e["latency_s"], k) for k in ("p50", "p90", "p99")))
        if len(run["endpoints"]) > 1:
            t = run["total"]
            table.add_row(run["phase"], str(run["concurrency"]), "total", f"{t['ok']}/{t['requests']}",
                          str(t["errors"]), f"{t['output_tok_s']:,.0f}", "", "", style="bold")
    console.print(table)
    for run in doc["runs"]:
        for name, ep in run["endpoints"].items():
            for sample in ep["summary"]["error_samples"]:
                console.print(f"error ({run['phase']} c={run['concurrency']} {name}): {sample}",
                              markup=False, highlight=False)
    if doc.get("eta"):
        console.print(sentence(doc["eta"]), markup=False, highlight=False)
        for note in doc["eta"]["notes"]:
            console.print(f"note: {note}", markup=False, highlight=False)


def _change(metric: dict[str, Any], scale: float = 1.0) -> str:
    old, new, pct = metric["old"], metric["new"], metric["change_pct"]
    if old is None or new is None:
        return "-"
    return f"{old * scale:,.0f} -> {new * scale:,.0f}" + (f" ({pct:+.1f}%)" if pct is not None else "")


def comparison(console: Console, cmp: dict[str, Any], old_name: str) -> None:
    table = Table(title=f"compared with {old_name} ({cmp['old']} -> {cmp['new']})")
    for col in ("phase", "c", "endpoint", "out tok/s", "TTFT p50 ms", "latency p50 ms", "errors"):
        table.add_column(col)
    for r in cmp["rows"]:
        table.add_row(r["phase"], str(r["concurrency"]), r["endpoint"], _change(r["output_tok_s"]),
                      _change(r["ttft_p50_s"], 1000), _change(r["latency_p50_s"], 1000),
                      f"{r['errors']['old']} -> {r['errors']['new']}")
    console.print(table)
    for line in cmp["settings_differ"]:
        console.print(f"note: settings differ, {line}", markup=False, highlight=False)
    if cmp["unmatched"]:
        console.print(f"only in one of the two: {', '.join(cmp['unmatched'])}", markup=False, highlight=False)
