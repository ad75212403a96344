"""What bench/vs_ansible.py reads and prints (pure: tests/unit/test_vs_ansible_report.py).

- the pct call log the bench's pct wrapper writes: one line per call,
  "<SSH_CONNECTION of the session>\t<subcommand> <vmid>"; distinct connections are
  SSH logins (sessions multiplexed over one login share its SSH_CONNECTION);
- ansible-playbook's PLAY RECAP line;
- the table of runs and the ratios against tuned Ansible.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Calls:
    pct: int        # pct invocations on the host
    logins: int     # distinct SSH connections they came over
    by_verb: dict[str, int] = field(default_factory=dict)


def parse_pct_log(text: str) -> Calls:
    conns: set[str] = set()
    verbs: dict[str, int] = {}
    pct = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        conn, _, call = line.partition("\t")
        pct += 1
        conns.add(conn)
        verb = call.split(" ", 1)[0] or "?"
        verbs[verb] = verbs.get(verb, 0) + 1
    return Calls(pct, len(conns - {"none"}), verbs)


_RECAP = re.compile(r"^(\S+)\s*:\s*((?:\w+=\d+\s*)+)$")


def parse_recap(output: str) -> dict[str, int]:
    """The counters (ok, changed, failed, ...) of the last PLAY RECAP host line; {} when none."""
    found: dict[str, int] = {}
    in_recap = False
    for line in output.splitlines():
        if line.startswith("PLAY RECAP"):
            in_recap, found = True, {}
            continue
        m = _RECAP.match(line.strip()) if in_recap else None
        if m:
            found = {k: int(v) for k, v in (kv.split("=") for kv in m.group(2).split())}
    return found


@dataclass
class Run:
    side: str       # "gpunode", "Ansible tuned", "Ansible as shipped"
    phase: str      # "cold" | "no-op"
    seconds: float
    calls: Calls
    changed: int
    ok: bool
    note: str = ""


def ratio(value: float, base: float | None) -> str:
    if not base:
        return "-"
    return f"{value / base:.3f}x"


def table(runs: list[Run], base_side: str = "Ansible tuned") -> str:
    """One row per run; the ratio columns are against base_side's run of the same phase."""
    base = {r.phase: r for r in runs if r.side == base_side}
    head = (f"{'side':<20} {'phase':<6} {'seconds':>9} {'pct calls':>10} {'logins':>7} {'changed':>8}  "
            f"{'time vs tuned':>13} {'pct vs tuned':>12}")
    lines = [head, "-" * len(head)]
    for r in runs:
        b = base.get(r.phase)
        lines.append(f"{r.side:<20} {r.phase:<6} {r.seconds:>9.2f} {r.calls.pct:>10,} {r.calls.logins:>7} "
                     f"{r.changed:>8}  {ratio(r.seconds, b.seconds if b else None):>13} "
                     f"{ratio(r.calls.pct, b.calls.pct if b else None):>12}"
                     + ("" if r.ok else "  FAILED") + (f"  {r.note}" if r.note else ""))
    return "\n".join(lines)


def goals(runs: list[Run], cold_max: float = 0.2, noop_max: float = 0.01) -> list[str]:
    """Issue 9's goal lines: gpunode cold <= 0.2x and no-op <= 0.01x of tuned Ansible's time."""
    out = []
    for phase, limit in (("cold", cold_max), ("no-op", noop_max)):
        g = next((r for r in runs if r.side == "gpunode" and r.phase == phase), None)
        t = next((r for r in runs if r.side == "Ansible tuned" and r.phase == phase), None)
        if g is None or t is None or not t.seconds:
            continue
        x = g.seconds / t.seconds
        out.append(f"goal {phase}: gpunode {x:.3f}x of tuned Ansible (goal <= {limit}x): "
                   + ("met" if x <= limit else "NOT met"))
    return out
