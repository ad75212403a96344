"""Human text of `inv status` and `inv history` (the --json forms are the to_dict()s)."""

from __future__ import annotations

from typing import Any

from gpunode.fleet.status import Report, Unit
from gpunode.fleet.units import human_seconds


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "?"
    text = f"{value:.1f}" if value % 1 else f"{value:.0f}"
    return text + unit


def unit_line(u: Unit) -> str:
    state = f"{u.active} ({u.sub})"
    parts = [f"{u.name:<13} {state:<19}"]
    if u.uptime_s is not None:
        parts.append(f"up {human_seconds(u.uptime_s)}")
    if u.port is not None:
        parts.append(f":{u.port} {'ready' if u.ready else 'NOT READY (HTTP ' + (u.health or '000') + ')'}")
    if u.engine or u.pinset:
        parts.append(" ".join(x for x in (u.engine, u.pinset) if x))
    model = ", ".join(u.served) or u.model
    if model:
        parts.append(f"model {model}")
    if u.gpus:
        parts.append("GPU " + ",".join(map(str, u.gpus)))
    parts.append(f"restarts {u.restarts}")
    if u.load_now is not None:
        m = u.load_now
        if u.kind in ("router", "fleet-router"):
            parts.append(f"in flight {_num(m.running)}")
        else:
            parts.append(f"running {_num(m.running)} queued {_num(m.queued)}")
            if u.tokens_per_s is not None:
                parts.append(f"{u.tokens_per_s:.1f} tok/s")
    return "  ".join(parts)


def status_lines(report: Report) -> list[str]:
    down = report.down()
    servers = sum(1 for u in report.units if u.kind == "server")
    router = any(u.kind == "router" for u in report.units)
    fleet = any(u.kind == "fleet-router" for u in report.units)
    head = f"{report.target}: {servers} server(s)" + (", router" if router else "")
    head += ", fleet router" if fleet else ""
    lines = [head + (": all up" if not down else f": {len(down)} down")]
    for u in report.units:
        lines.append("  " + unit_line(u))
        if u.failure and (u.problem() or u.restarts):
            lines.append(f"    last failure: {u.failure}")
    if report.workers:
        shown = ", ".join(f"{w.server or w.url} {'healthy' if w.healthy else 'UNHEALTHY'}"
                          + (f" load {w.load}" if w.load else "") for w in report.workers)
        lines.append(f"  router workers: {shown}")
    if report.fleet_workers or report.fleet_expected:
        lines.append(f"  fleet router workers ({len(report.fleet_workers)} of {len(report.fleet_expected)}):")
        for w in report.fleet_workers:
            lines.append(f"    {w.server or '?':<24} {w.url:<28} {'healthy' if w.healthy else 'UNHEALTHY'}"
                         + (f" load {w.load}" if w.load else ""))
    users: dict[int, list[str]] = {}
    for u in report.units:
        for index in u.gpus:
            users.setdefault(index, []).append(u.name)
    for g in report.gpus:
        who = f" ({', '.join(users[g.index])})" if g.index in users else ""
        lines.append(f"  GPU {g.index}: {g.used_mib}/{g.total_mib} MiB used{who}")
    lines += [f"  note: {n}" for n in report.notes]
    lines += [f"  DOWN {d}" for d in down]
    return lines


def runs(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Journal entries -> one record per run, oldest first: when, who, what changed."""
    out: dict[str, dict[str, Any]] = {}
    for e in entries:
        run = str(e.get("run", "?"))
        r = out.setdefault(run, {"run": run, "by": e.get("by", "?"), "first": e.get("time", "?"),
                                 "last": e.get("time", "?"), "steps": 0, "handlers": 0, "changes": []})
        r["last"] = e.get("time", r["last"])
        r["handlers" if e.get("kind") == "handler" else "steps"] += 1
        r["changes"].append({k: e.get(k, "") for k in ("time", "role", "kind", "step", "summary")})
    return list(out.values())


def history_lines(target: str, records: list[dict[str, Any]], verbose: bool) -> list[str]:
    if not records:
        return [f"{target}: no runs recorded (gpunode has not changed anything here)"]
    lines = [f"{target}: {len(records)} run(s)"]
    for r in records:
        lines.append(f"  {r['first']}  {r['by']}  run {r['run']}: {r['steps']} step(s) changed, "
                     f"{r['handlers']} handler(s) ran")
        shown = r["changes"] if verbose else r["changes"][:12]
        for c in shown:
            lines.append(f"      {c['role']}: {c['step']}: {c['summary']}"[:240])
        if len(shown) < len(r["changes"]):
            lines.append(f"      ... {len(r['changes']) - len(shown)} more (--verbose shows all)")
    return lines
