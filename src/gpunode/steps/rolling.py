"""Rolling replacement and generations (issue 39): a changed server is replaced behind its router, one
at a time, and goes back by itself to the last generation that passed Ready when the new one does not
come up.

A generation is the set of files that make the servers what they are (env files, unit files, the
router's): their ExecStart names the venv, so the files are the venv, the flags and the env at once.
`Keep` records the live set under /var/lib/gpunode/generations/<name>/ once every server passed Ready
and answered a completion; `RollingRestart` is the servers role's own handler for `restart:<unit>`
(a role's handler wins over the generic systemctl one, engine/handlers.resolve) and runs
steps/roll_server.py on the target. The venv of an earlier pin set stays where it is
(/opt/gpunode/venvs/<pinset>), so going back is copying the files back and restarting.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from typing import ClassVar

from gpunode import shell
from gpunode.errors import RolledBack, StepError, tail
from gpunode.steps.base import Change, Command, NoChange, Outcome, Probe, Step, inline
from gpunode.transport.base import Transport

GENERATIONS = "/var/lib/gpunode/generations"

# The recorded name of the live generation, read in the batch's own shell (no fork on a no-op).
_CURRENT = inline('gn_g=; [ ! -f "$1" ] || read -r gn_g < "$1"; printf \'%s\\n\' "$gn_g"')

_KEEP = shell.script("gpunode.steps", "generation_keep.sh")


def generation_name(files: dict[str, str]) -> str:
    """A name for a set of files ({path: sha256}): the same files, the same name."""
    text = "\n".join(f"{p} {h}" for p, h in sorted(files.items()))
    return "g-" + hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass
class Keep(Step):
    """The live files are recorded as the generation to go back to, once the servers passed Ready.

    + files: {path: sha256 of its desired content}; sensitive files count by path only
    + meta: what `inv history` shows of it (pinset, engine, venv)
    """

    changes_facts: ClassVar[bool] = False

    files: dict[str, str] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    root: str = GENERATIONS

    @property
    def id(self) -> str:
        return "generation"

    @property
    def name(self) -> str:
        return generation_name(self.files)

    def probe(self) -> list[str]:
        return ["sh", "-c", _CURRENT, "sh", f"{self.root}/current"]

    def check(self, probe: Probe) -> Outcome:
        live = probe.output.strip() if probe.ok else ""
        what = f"generation {self.name} ({self.meta.get('pinset', '?')}, {len(self.files)} files)"
        if live == self.name:
            return NoChange(f"{what} is live and recorded as the one to go back to")
        return Change(f"record {what} as the one to go back to" + (f" (was {live})" if live else ""))

    def commands(self) -> list[Command]:
        meta = json.dumps({"name": self.name, **self.meta}, sort_keys=True)
        return [Command(tuple(shell.sh(_KEEP, self.root, self.name, meta, *sorted(self.files))),
                        f"recording generation {self.name}", failure=f"generation {self.name} was not recorded",
                        hint=f"is {self.root} writable on the target?")]


@dataclass(frozen=True)
class Route:
    router: str   # the router's base URL as the target reaches it
    worker: str   # the server's URL as that router lists it
    # A router with keys of its own (a fleet router, fleet/keys.py): the key its worker API takes, and
    # the one it sends this worker (given again when the worker goes back in). Both on stdin only.
    key: str = field(default="", repr=False, compare=False)
    worker_key: str = field(default="", repr=False, compare=False)


@dataclass(frozen=True)
class Rolled:
    unit: str
    url: str
    model: str
    routes: tuple[Route, ...] = ()
    health: str = "/health"


def script() -> str:
    return resources.files("gpunode.steps").joinpath("roll_server.py").read_text()


@dataclass(frozen=True)
class ScriptCommand(Command):
    """A command whose argv carries a whole script (`python -c TEXT`): shown with the script's name in
    its place, so `--commands` stays readable."""

    script_name: str = ""

    def shown(self) -> str:
        words = [f"<{self.script_name}>" if i == 2 else shell.quote(w) for i, w in enumerate(self.argv)]
        return " ".join(words) + (f"  # stdin: {len(self.stdin)} bytes" if self.stdin is not None else "")


@dataclass(frozen=True)
class RollingRestart:
    """The handler `restart:<unit>` of a server: out of its routers, drained, restarted, Ready and a
    canary completion, back in; a server that does not come up takes the target back one generation."""

    name: str
    unit: str
    python: str                       # the engine venv's Python runs roll_server.py
    servers: tuple[Rolled, ...]       # every server of the target: a rollback may replace each of them
    drain_s: int = 300
    ready_s: int = 1800
    key: str = field(default="", repr=False)
    root: str = GENERATIONS

    def request(self) -> dict:
        return {"unit": self.unit, "generations": self.root, "drain_s": self.drain_s, "ready_s": self.ready_s,
                "servers": [{"unit": s.unit, "url": s.url, "model": s.model, "health": s.health,
                             "routes": [{"router": r.router, "worker": r.worker} for r in s.routes]}
                            for s in self.servers]}

    def stdin(self) -> bytes:
        """The servers' key; a JSON object with it when a router has keys of its own (roll_server.py)."""
        own = [r for s in self.servers for r in s.routes if r.key or r.worker_key]
        if not own:
            return self.key.encode()
        routers: dict[str, dict] = {}
        for r in own:
            entry = routers.setdefault(r.router, {"key": r.key, "workers": {}})
            entry["workers"][r.worker] = r.worker_key
        return json.dumps({"key": self.key, "routers": routers}, sort_keys=True).encode()

    def _command(self) -> Command:
        routers = sorted({r.router for s in self.servers if s.unit == self.unit for r in s.routes})
        what = (f"replace {self.unit} behind {', '.join(routers)}: out, drained, restarted, Ready and a "
                "canary, back in" if routers else f"restart {self.unit}, Ready and a canary")
        return ScriptCommand((self.python, "-c", script(), json.dumps(self.request(), sort_keys=True)), what,
                             stdin=self.stdin(), timeout=self.drain_s + 3 * self.ready_s + 120,
                             script_name="gpunode/steps/roll_server.py")

    def commands(self) -> list[Command]:
        return [self._command()]

    def run(self, target: Transport) -> None:
        c = self._command()
        r = target.run(c.argv, stdin=c.stdin, timeout=c.timeout, what=c.what)
        lines = r.stdout.splitlines()
        last = next((x for x in reversed(lines) if x.startswith("@@")), "")
        if r.exit_code == 5 and last.startswith("@@rolledback "):
            head, _, why = last[len("@@rolledback to generation "):].partition(": ")
            raise RolledBack(why, target=target.name, generation=head, evidence=tail(r.stdout, 20))
        if not r.ok:
            why = last[len("@@failed "):] if last.startswith("@@failed ") else f"exit code {r.exit_code}"
            raise StepError(f"{self.unit} was not replaced: {why}", target=target.name,
                            evidence=tail(r.stdout + r.stderr, 20),
                            hint=f"see `journalctl -u {self.unit}` on the target (inv logs)")


def parse_log(text: str) -> list[tuple[str, str]]:
    """generations/log -> [(time, name)], oldest first."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].startswith("g-"):
            out.append((parts[0], parts[1]))
    return out


def previous(log: list[tuple[str, str]], current: str) -> str:
    """The generation live before `current` (the last other name in the log), or ""."""
    for _, name in reversed(log):
        if name != current:
            return name
    return ""
