"""The generations kept on a target (steps/rolling.py), as `inv history` lists them, and `inv rollback`:
back one generation by hand, each changed server replaced behind the router as in a rollout.

What a generation is comes from the target alone (its meta and files under
/var/lib/gpunode/generations), and the servers and the router from `inv status`'s view of the units,
not from the inventory: a rollback must work when the inventory already names the next pin set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpunode import shell
from gpunode.engine import journal, lock
from gpunode.engine.lock import Owner
from gpunode.errors import InventoryError, StepError, tail
from gpunode.fleet.status import Report
from gpunode.steps.rolling import GENERATIONS, parse_log, previous, script
from gpunode.transport.base import Transport

if TYPE_CHECKING:
    from gpunode.fleet.endpoint import MemberRoute

_LIST = shell.script("gpunode.fleet", "generations_list.sh")


@dataclass
class Generation:
    name: str
    meta: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    recorded: str = ""   # when it last became the live one (the log's time)
    live: bool = False


def parse(text: str) -> tuple[list[Generation], list[tuple[str, str]]]:
    """generations_list.sh's output -> (the kept generations, the most recently live first; the log)."""
    current, log = "", []
    gens: dict[str, Generation] = {}
    part, gen = "", None
    for line in text.splitlines():
        if line.startswith("@@"):
            word, _, rest = line[2:].partition(" ")
            part = word
            if word == "generation":
                gen = gens.setdefault(rest, Generation(rest))
            continue
        if part == "current" and line.strip():
            current = line.strip()
        elif part == "log":
            log.extend(parse_log(line))
        elif part == "generation" and gen is not None and line.strip():
            try:
                meta = json.loads(line)
            except ValueError:
                meta = {}
            gen.meta = {str(k): str(v) for k, v in meta.items()} if isinstance(meta, dict) else {}
        elif part == "files" and gen is not None and line.strip():
            gen.files.append(line.strip())
    for when, name in log:
        if name in gens:
            gens[name].recorded = when
    if current in gens:
        gens[current].live = True
    return sorted(gens.values(), key=lambda g: (g.live, g.recorded), reverse=True), log


def read(target: Transport, root: str = GENERATIONS) -> tuple[list[Generation], str]:
    """(the kept generations, the one to go back to: the last other one that was live)."""
    r = target.run(shell.sh(_LIST, root), timeout=60)
    r.check("listing the kept generations")
    gens, log = parse(r.stdout)
    live = next((g.name for g in gens if g.live), "")
    return gens, previous([x for x in log if any(g.name == x[1] for g in gens)], live)


def lines(gens: list[Generation]) -> list[str]:
    """`inv history`'s generations part."""
    if not gens:
        return ["  generations: none kept yet (one is kept when every server passed Ready after a run)"]
    out = ["  generations (newest first; `inv rollback` goes back to the one below the live one):"]
    for g in gens:
        what = ", ".join(f"{k} {g.meta[k]}" for k in ("pinset", "engine", "venv") if g.meta.get(k))
        out.append(f"  {'*' if g.live else ' '} {g.name}  {g.recorded or '?'}  {what}  ({len(g.files)} files)"
                   + ("  live" if g.live else ""))
    return out


def request(report: Report, gen: Generation, *, drain_s: int, ready_s: int, fleet: MemberRoute | None = None) -> dict:
    """roll_server.py's request for going back to `gen`: every server with its files and the routers
    that list it (its target's, found there by its port; a fleet member's fleet router, at the URL it
    lists the server under), the router last."""
    router = next((u for u in report.units if u.kind == "router" and u.port), None)
    model = next((u.model for u in report.units if u.kind == "server" and u.model), "")

    def files(name: str, unit: str) -> list[str]:
        return [f for f in gen.files if f.rsplit("/", 1)[-1].startswith(f"{name}.") or f.endswith("/" + unit)]

    def routes(port: int) -> list[dict]:
        own = [{"router": f"http://127.0.0.1:{router.port}", "port": port}] if router else []
        return own + ([{"router": fleet.router, "worker": f"http://{fleet.host}:{port}"}] if fleet else [])

    servers = [{"unit": u.id, "url": f"http://127.0.0.1:{u.port}", "model": u.model or model, "health": "/health",
                "files": files(u.name, u.id), "routes": routes(u.port)}
               for u in report.units if u.kind == "server" and u.port]
    return {"to": gen.name, "generations": GENERATIONS, "drain_s": drain_s, "ready_s": ready_s, "servers": servers,
            "router": {"unit": router.id, "files": files("router", router.id)} if router else {}}


def keys(req: dict, key: str, fleet: MemberRoute | None) -> bytes:
    """roll_server.py's stdin: the servers' key; with a fleet router, the JSON form with the router's own
    key (its worker API takes the clients' key) and the one it sends each server (the server's key: a
    generation never holds a key, so going back keeps the one the server has now)."""
    if not fleet:
        return key.encode()
    workers = {r["worker"]: key for s in req["servers"] for r in s["routes"] if r["router"] == fleet.router}
    return json.dumps({"key": key, "routers": {fleet.router: {"key": fleet.key, "workers": workers}}},
                      sort_keys=True).encode()


def rollback(target: Transport, report: Report, owner: Owner, state_dir: str, *, to: str = "", key: str = "",
             drain_s: int = 300, ready_s: int = 1800, fleet: MemberRoute | None = None) -> tuple[str, list[str]]:
    """Go back to generation `to` (default: the one live before the live one); (its name, what
    roll_server.py said) or StepError. `fleet`: a fleet member's way out of its fleet router and back."""
    gens, before = read(target)
    name = to or before
    gen = next((g for g in gens if g.name == name), None)
    if gen is None or not name:
        kept = ", ".join(g.name for g in gens) or "none"
        raise InventoryError(f"{target.name}: no generation {name!r} to go back to" if name else
                             f"{target.name}: no earlier generation is kept", target=target.name,
                             hint=f"kept: {kept} (inv history lists them)")
    if gen.live:
        raise InventoryError(f"{target.name}: generation {name} is the live one already", target=target.name,
                             hint="inv history lists the kept generations")
    python = f"{gen.meta['venv'].rstrip('/')}/bin/python" if gen.meta.get("venv") else "python3"
    req = request(report, gen, drain_s=drain_s, ready_s=ready_s, fleet=fleet)
    by = f"{owner.user}@{owner.workstation}"
    with lock.acquire(target, state_dir, owner):
        journal.update(target, state_dir, owner.run_id, entries=[
            journal.Entry(owner.run_id, by, "servers", "step", f"rollback:{name}", f"back to generation {name}")])
        r = target.run([python, "-c", script(), json.dumps(req, sort_keys=True)], stdin=keys(req, key, fleet),
                       timeout=drain_s + ready_s * (len(req["servers"]) + 1) + 120)
    said = [x for x in r.stdout.splitlines() if x.startswith("@@")]
    if not r.ok:
        why = next((x[len("@@failed "):] for x in reversed(said) if x.startswith("@@failed ")),
                   f"exit code {r.exit_code}")
        raise StepError(f"{target.name}: the rollback to {name} failed: {why}", target=target.name,
                        evidence=tail(r.stdout + r.stderr, 20), hint="inv status shows what runs; inv logs why")
    return name, said
