"""The test bed on a provisioned target (search.Bed): one of its servers is taken out of its routers and
stopped while the others keep serving; each candidate runs in its place as a transient systemd unit
(`gpunode-tune-<server>.service`, the same port, its own env file, the real server's secrets file and
CPU cores), is waited for (health and one real completion), benched alone with the job's shape, its
memory read; at the end the real server starts again from its own unit and goes back into its routers.
The target's files (units, env files, generations) are never touched: what runs afterwards is what the
inventory says, and `inv tune` applies the winner through the inventory and the servers role."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

from gpunode.bench.runner import Spec, bench
from gpunode.errors import GpunodeError, StepError, tail
from gpunode.resolve.plan import Plan
from gpunode.steps.rolling import RollingRestart
from gpunode.steps.rolling import script as roll_script
from gpunode.steps.secretfiles import server_home
from gpunode.steps.unitfmt import env_text
from gpunode.transport.base import Transport
from gpunode.tune import search
from gpunode.tune.check import engine_verdict, refusal

WORKDIR = "/var/lib/gpunode"


def remote_text() -> str:
    return resources.files("gpunode.tune").joinpath("bed_remote.py").read_text()


@dataclass
class SystemdBed:
    """search.Bed on a target gpunode provisioned. resolve(overrides) -> the candidate's Plan (raises
    GpunodeError where a rule refuses it); plan: the target's plan as provisioned; roll: the servers
    role's RollingRestart of the test bed server (its routes and keys)."""

    transport: Transport
    plan: Plan
    resolve: Any
    server: str
    roll: RollingRestart
    spec: Spec
    key: str = field(default="", repr=False)
    grace_s: int = 1800
    judge_s: float = 180.0
    plans: dict[str, Plan] = field(default_factory=dict)
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)
    _judged: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    left: list[list[str]] = field(default_factory=list)
    taken_out: bool = False

    @property
    def unit(self) -> str:
        return f"gpunode-{self.server}.service"

    @property
    def bed_unit(self) -> str:
        return f"gpunode-tune-{self.server}.service"

    def _real(self):
        return next(s for s in self.roll.servers if s.unit == self.unit)

    def _call(self, req: dict[str, Any], timeout: float) -> list[str]:
        argv = [self.roll.python, "-c", remote_text(), roll_script(), json.dumps(req)]
        r = self.transport.run(argv, stdin=self.roll.stdin(), timeout=timeout, what=f"tune {req['action']}")
        lines = [x for x in r.stdout.splitlines() if x.startswith("@@")]
        if not r.ok:
            last = next((x for x in reversed(lines) if x.startswith("@@failed ")), "")
            raise StepError(last[len("@@failed "):] or f"the test bed's {req['action']} failed (exit {r.exit_code})",
                            target=self.transport.name, evidence=tail(r.stdout + r.stderr, 15),
                            hint=f"journalctl -u {self.bed_unit} on the target shows the candidate's own log")
        return lines

    def prepare(self, overrides: dict[str, Any]) -> tuple[list[str], str]:
        try:
            plan = self.resolve(overrides)
        except GpunodeError as exc:
            return [], f"gpunode's rules refuse it: {exc.message}"
        s = next((x for x in plan.servers if x.name == self.server), None)
        if s is None:
            return [], f"the candidate's plan has no server {self.server}"
        self.plans[json.dumps(overrides, sort_keys=True)] = plan
        same = json.dumps([plan.venv, list(s.args), sorted(plan.server_env(s).items())])
        if same not in self._judged:  # another way of writing one command line: the engine's verdict is one
            self._judged[same] = engine_verdict(self.transport, plan.engine, plan.venv, list(s.args),
                                                plan.server_env(s), self.judge_s)
        verdict = self._judged[same]
        self.verdicts[search.label(overrides)] = verdict
        return list(s.argv), refusal(verdict)

    def take_out(self) -> None:
        real = self._real()
        lines = self._call({"action": "out", "unit": self.unit, "url": real.url, "drain_s": self.roll.drain_s,
                            "routes": [{"router": r.router, "worker": r.worker} for r in real.routes]},
                           self.roll.drain_s + 120)
        got = next((x for x in lines if x.startswith("@@left ")), "@@left []")
        self.left = json.loads(got[len("@@left "):])
        self.taken_out = True

    def measure(self, cand: search.Candidate, deadline_s: float) -> dict[str, Any]:
        if not self.taken_out:
            self.take_out()
        plan = self.plans[json.dumps(cand.overrides, sort_keys=True)]
        s = next(x for x in plan.servers if x.name == self.server)
        env = plan.server_env(s)
        home = server_home(plan.engine, s.name, self.unit, self.key)
        real = self._real()
        req = {"action": "start", "bed": self.bed_unit, "argv": [*s.argv, *home.extra_argv],
               "env_text": env_text(env), "secrets": [home.env_file] if home.env_file else [],
               "cpu_affinity": env.get("VLLM_CPU_OMP_THREADS_BIND", "") if not s.gpus else "",
               "workdir": WORKDIR, "url": real.url, "model": plan.model.served_model_name,
               "ready_s": int(max(10, min(self.grace_s, deadline_s)))}
        try:
            lines = self._call(req, req["ready_s"] + 120)
            started = float(next(x for x in lines if x.startswith("@@started ")).split()[1])
            one = replace(plan, servers=(s,), router=None)
            doc = bench(self.transport, one, self.spec, key=self.key)
            mem = self._call({"action": "memory", "bed": self.bed_unit,
                              "gpus": ",".join(str(g) for g in s.gpus)}, 60)
            words = next((x for x in mem if x.startswith("@@memory ")), "@@memory -1 ?").split(" ", 2)
            used = int(words[1])
        finally:
            self._call({"action": "stop", "bed": self.bed_unit}, 120)
        return {**search.figures(doc), "start_to_ready_s": round(started, 1),
                "memory_bytes": used if used >= 0 else None, "memory_what": words[2] if len(words) > 2 else ""}

    def put_back(self) -> None:
        """The real server again, from its own unit, Ready and back in its routers (also after a failure)."""
        if not self.taken_out:
            return
        real = self._real()
        self._call({"action": "back", "bed": self.bed_unit, "unit": self.unit, "url": real.url, "model": real.model,
                    "ready_s": self.grace_s, "left": self.left}, self.grace_s * 2 + 120)
        self.taken_out = False


