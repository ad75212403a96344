"""`inv logs`: the journal of one server's unit, the router's, or all of gpunode's units.

One command on the target: check the unit is installed (else list the ones that are), then
journalctl with the user's --since/--lines/--follow. Values reach journalctl as argv words.
"""

from __future__ import annotations

import re

from gpunode import shell
from gpunode.errors import InventoryError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

SCRIPT = shell.script("gpunode.fleet", "logs.sh")


def unit_for(server: str | None, router: bool) -> str:
    """--server NAME / --router / neither (all gpunode units) -> the unit pattern for journalctl."""
    if server and router:
        raise InventoryError("give --server NAME or --router, not both", hint="inv logs --server cpu0")
    if router:
        return "gpunode-router.service"
    if server:
        if not NAME.fullmatch(server):
            raise InventoryError(f"--server {server[:40]!r} is not a server name",
                                 hint="server names are like cpu0 or gpu3 (inv status lists them)")
        return f"gpunode-{server.removeprefix('gpunode-').removesuffix('.service')}.service"
    return "gpunode-*"


def argv(unit: str, since: str | None, lines: int, follow: bool) -> list[str]:
    words = ["-n", str(lines)]
    if since:
        if since.startswith("-") or len(since) > 64:
            raise InventoryError(f"--since {since[:40]!r} is not a time journalctl reads",
                                 hint='e.g. --since "1 hour ago", --since today, --since "2026-12-03 10:00"')
        words += ["--since", since]
    if follow:
        words.append("--follow")
    return shell.sh(SCRIPT, unit, *words)


def missing(unit: str, target: str, stdout: str) -> InventoryError:
    there = [x for x in stdout.splitlines()[1:] if x.strip()]
    names = ", ".join(x.removeprefix("gpunode-").removesuffix(".service") for x in there) or "none"
    return InventoryError(f"{unit} is not installed on {target}", target=target,
                          hint=f"gpunode units there: {names}; inv status lists them")
