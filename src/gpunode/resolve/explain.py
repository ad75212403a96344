"""A plan as text a person can check line by line against the facts it cites."""

from __future__ import annotations

import textwrap

from gpunode.resolve.plan import Plan
from gpunode.shell import join

WIDTH = 100


def _wrap(label: str, text: str, indent: int = 7) -> list[str]:
    if not text:
        return []
    pad = " " * indent
    return textwrap.wrap(text, WIDTH, initial_indent=f"{pad}{label:<7}", subsequent_indent=pad + " " * 7,
                         break_on_hyphens=False, break_long_words=False)


def render(plan: Plan, *, decisions: bool = True) -> str:
    out: list[str] = []
    m = plan.model
    out.append(f"Plan for {plan.target}: {plan.engine} {plan.engine_version} "
               f"(pin set {plan.pinset}, {plan.pinset_status}), python{plan.python}, venv {plan.venv}")
    out.append(f"Model: {m.label} at {m.path}, served as {m.served_model_name}")
    if plan.weights is not None and plan.weights.stage:
        out.append(f"Weights: copied from {plan.weights.source} to {plan.weights.dest} before the servers start")
    t = plan.topology
    out.append(f"Topology: {t.kind}, {t.servers} server(s), tp {t.tp}"
               + (f", GPUs {list(t.gpus)}" if t.gpus else ""))
    if decisions:
        out += ["", "Decisions"]
        for i, d in enumerate(plan.decisions, 1):
            out.append(f"  {i:>2}. {d.decision}: {d.value}")
            out += _wrap("why", d.reason)
            out += _wrap("fact", d.fact)
            out += _wrap("rule", "  ".join(x for x in (d.rule, f"source: {d.source}" if d.source else "") if x))
    out += ["", "Packages"]
    width = max(len(p.requirement) for p in plan.packages)
    for p in plan.packages:
        stand = f"  (CI tests PyPI's {p.pypi_standin})" if p.pypi_standin else ""
        out.append(f"  {p.requirement:<{width}}  from {p.index_url}{stand}")
    out.append(f"  index-url {plan.indexes.index_url}"
               + "".join(f"  extra-index-url {u}" for u in plan.indexes.extra_index_urls))
    if plan.env:
        out += ["", "Environment (every server)"]
        out += [f"  {k}={v}" for k, v in plan.env.items()]
    out += ["", "Servers"]
    first = plan.servers[0] if plan.servers else None
    for s in plan.servers:
        env = " ".join(f"{k}={v}" for k, v in s.env.items())
        t = plan.topology
        http = "" if s.serves_http else f"  (no HTTP: rank {t.node_rank} of {t.nnodes}; the head serves the API)"
        out.append(f"  {s.name:<8} port {s.port}  {env}{http}")
    if first:
        out.append("  command of the first (the others differ only in --port and the variables above):")
        out += textwrap.wrap(join(first.argv), WIDTH, initial_indent="    ", subsequent_indent="      ",
                             break_on_hyphens=False, break_long_words=False)
    if plan.router:
        r = plan.router
        out += ["", f"Router: {r.package} on {r.host}:{r.port}, policy {r.policy}"]
        out += textwrap.wrap(join(r.argv), WIDTH, initial_indent="    ", subsequent_indent="      ",
                             break_on_hyphens=False, break_long_words=False)
    if plan.fixes:
        out += ["", "Fixes"]
        for f in plan.fixes:
            kinds = ", ".join(a.kind for a in f.actions)
            out.append(f"  - {f.id} ({f.phase}): {kinds}")
    if plan.warnings:
        out += ["", "Warnings"]
        for w in plan.warnings:
            out += textwrap.wrap(w, WIDTH, initial_indent="  ! ", subsequent_indent="    ")
    return "\n".join(out) + "\n"
