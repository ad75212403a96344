"""`inv status` of one target: gather.py's output parsed into units, servers, router, GPUs,
and the list of what is down.

Everything comes from what is installed and running on the target (unit files, systemd,
the servers' own answers), not from the inventory's plan: status shows what is there,
including a unit the current plan would no longer make.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gpunode import listen
from gpunode.fleet import metrics, units
from gpunode.fleet.gather import FLEET_UNIT, ROUTER_UNIT, sections


@dataclass
class Unit:
    id: str
    kind: str                      # "server", "router", "fleet-router", "staging", "other"
    name: str                      # "cpu0", "router", "demo"
    active: str                    # ActiveState
    sub: str                       # SubState
    load: str                      # LoadState
    pid: int = 0
    restarts: int = 0
    result: str = ""
    since: datetime | None = None  # when it last became active
    uptime_s: float | None = None
    engine: str = ""
    pinset: str = ""
    model: str = ""                # what the command line serves (--served-model-name)
    served: list[str] = field(default_factory=list)  # what /v1/models answers
    port: int | None = None
    health: str = ""               # HTTP code of /health (/readiness for the router); "" not asked
    load_now: metrics.Load | None = None
    tokens_per_s: float | None = None
    failure: str | None = None     # the journal line that says why it failed
    gpus: list[int] = field(default_factory=list)
    argv: list[str] = field(default_factory=list, repr=False)  # ExecStart's command line

    @property
    def ready(self) -> bool:
        return self.health == "200"

    def problem(self) -> str | None:
        """Why this unit counts as down; None when it is up."""
        if self.load != "loaded":
            return f"unit {self.load or 'not found'}"
        if self.kind == "staging":
            return None if self.active == "active" else f"{self.active} ({self.sub}, result {self.result})"
        if self.active != "active":
            return f"{self.active} ({self.sub}" + (f", result {self.result}" if self.result != "success" else "") + ")"
        if self.port is not None and not self.ready:
            asked = "/readiness" if self.kind in ROUTERS else "/health"
            return f"running but {asked} answers {'nothing' if self.health in ('', '000') else 'HTTP ' + self.health}"
        return None

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k not in ("since", "load_now", "argv")}
        d["since"] = self.since.isoformat() if self.since else None
        d["metrics"] = self.load_now.to_dict() if self.load_now else None
        d["up"] = self.problem() is None
        return d


@dataclass
class Worker:
    url: str
    server: str          # the server unit's name at that port, "" when none; "TARGET SERVER" for a fleet's
    healthy: bool
    load: int | None = None


ROUTERS = ("router", "fleet-router")


@dataclass
class Gpu:
    index: int
    used_mib: int
    total_mib: int


@dataclass
class Report:
    target: str
    units: list[Unit] = field(default_factory=list)
    workers: list[Worker] = field(default_factory=list)
    fleet_workers: list[Worker] = field(default_factory=list)  # the fleet router's view, when it runs here
    fleet_expected: list[Worker] = field(default_factory=list)  # the fleet's servers, as provisioned
    gpus: list[Gpu] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def down(self) -> list[str]:
        """'NAME: why' for each thing that is down; [] when all is up."""
        out = [f"{u.name}: {p}" for u in self.units if (p := u.problem())]
        out += [f"router: worker {w.server or w.url} unhealthy" for w in self.workers if not w.healthy]
        if self.workers:   # a server the router does not list gets no requests through it
            listed = {w.server for w in self.workers}
            out += [f"router: {u.name} is not one of its workers" for u in self.units
                    if u.kind == "server" and u.port and u.name not in listed and not u.problem()]
        out += self.fleet_down()
        if not any(u.kind in ("server", *ROUTERS) for u in self.units):
            out.append("no gpunode servers are installed (run inv provision)")
        return out

    def fleet_down(self) -> list[str]:
        """A lost worker of the fleet router, named by its target and server; one it does not list."""
        if not any(u.kind == "fleet-router" for u in self.units):
            return []
        listed = {w.url for w in self.fleet_workers}
        named = {w.url: w.server for w in self.fleet_expected}
        out = [f"fleet-router: worker {named.get(w.url, w.url)} ({w.url}) unhealthy"
               for w in self.fleet_workers if not w.healthy]
        out += [f"fleet-router: {w.server} ({w.url}) is not one of its workers" for w in self.fleet_expected
                if w.url not in listed]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"type": "status", "target": self.target, "up": not self.down(), "down": self.down(),
                "units": [u.to_dict() for u in self.units], "workers": [w.__dict__ for w in self.workers],
                "fleet_workers": [w.__dict__ for w in self.fleet_workers],
                "gpus": [g.__dict__ for g in self.gpus], "notes": self.notes}


def _kind(unit_id: str, argv: list[str]) -> str:
    if unit_id == ROUTER_UNIT:
        return "router"
    if unit_id == FLEET_UNIT:
        return "fleet-router"
    if unit_id == "gpunode-stage-weights.service":
        return "staging"
    return "server" if listen.flag_value(argv, "--port") else "other"


def _engine(description: str) -> str:
    """The engine from the unit's Description, `gpunode vllm-cpu server cpu0 (CPU core 0)`."""
    words = description.split()
    return words[1] if len(words) > 2 and words[0] == "gpunode" and words[2] == "server" else ""


def _pinset(argv: list[str]) -> str:
    """The pin set is the engine venv's folder name: /opt/gpunode/venvs/<pinset>/bin/python."""
    if argv and argv[0].endswith("/bin/python"):
        return posixpath.basename(posixpath.dirname(posixpath.dirname(argv[0])))
    return ""


def unit_from(props: dict[str, str], now: datetime | None, zone: tuple[str, str]) -> Unit:
    argv = units.exec_argv(props.get("ExecStart", ""))
    uid = props["Id"]
    name = uid.removeprefix("gpunode-").removesuffix(".service")
    u = Unit(id=uid, kind=_kind(uid, argv), name=name, active=props.get("ActiveState", ""),
             sub=props.get("SubState", ""), load=props.get("LoadState", ""),
             pid=int(props.get("MainPID") or 0), restarts=int(props.get("NRestarts") or 0),
             result=props.get("Result", ""), engine=_engine(props.get("Description", "")), pinset=_pinset(argv),
             model=listen.flag_value(argv, "--served-model-name") or "", argv=argv)
    if u.kind in ROUTERS:
        u.pinset = ""
    if u.active == "active":
        u.since = units.parse_stamp(props.get("ActiveEnterTimestamp", ""), *zone)
        if u.since and now:
            u.uptime_s = max(0.0, (now - u.since).total_seconds())
    return u


def _models(lines: list[str]) -> list[str]:
    try:
        data = json.loads("\n".join(lines) or "null")
    except ValueError:
        return []
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        return []
    return [m["id"] for m in data["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)]


def parse_workers(text: str, port_names: dict[int, str]) -> list[Worker]:
    """The router's GET /workers JSON -> workers, each named by the server at its port."""
    try:
        data = json.loads(text or "null")
    except ValueError:
        return []
    rows = data.get("workers") if isinstance(data, dict) else None
    out = []
    for w in rows if isinstance(rows, list) else []:
        if not isinstance(w, dict) or not isinstance(w.get("url"), str):
            continue
        out.append(Worker(w["url"], _port_name(w["url"], port_names), bool(w.get("is_healthy")),
                          w.get("load") if isinstance(w.get("load"), int) else None))
    return sorted(out, key=lambda w: w.url)  # the router lists them in no fixed order


def gpu_memory(text: str) -> list[Gpu]:
    """Memory used and total per GPU from the default `nvidia-smi` table."""
    from gpunode.facts import gpu as smi

    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = smi._GPU_ROW.match(line.strip())
        follow = smi._block_lines(lines, i + 1) if m else []
        if not m or not follow:
            continue
        cells = smi._cells(follow[0])
        mem = smi._MEMORY.search(cells[1]) if len(cells) > 1 else None
        if mem:
            out.append(Gpu(int(m["index"]), int(mem.group(1)), int(mem.group(2))))
    return out


def parse(target: str, text: str) -> Report:
    """gather.py's output -> the target's report."""
    report = Report(target)
    secs = sections(text)
    now, zone = None, ("UTC", "+0000")
    by_id: dict[str, Unit] = {}
    samples: dict[str, dict[str, tuple[float, str]]] = {"metrics": {}, "metrics2": {}}
    workers_text = fleet_text = ""
    env: list[str] = []
    fleet_map: list[str] = []
    for name, head, body in secs:
        if name == "clock" and body:
            words = body[0].split()
            if len(words) == 3 and words[0].isdigit():
                now = datetime.fromtimestamp(int(words[0]), tz=UTC)
                zone = (words[1], words[2])
        elif name == "show":
            for props in units.parse_show("\n".join(body)).values():
                u = unit_from(props, now, zone)
                by_id[u.id] = u
                report.units.append(u)
        elif name == "nvidia-smi":
            report.gpus = gpu_memory("\n".join(body))
        elif name == "env":
            env = body
        elif name == "fleetmap":
            fleet_map = body
        elif not head or head[0] not in by_id:
            continue
        elif name == "port":
            words = (body or [""])[0].split()
            by_id[head[0]].port = int(words[0]) if words and words[0].isdigit() else None
        elif name == "health":
            by_id[head[0]].health = (body or [""])[0].strip()
        elif name == "models":
            # the router answers model "unknown" for workers it has not asked
            by_id[head[0]].served = [m for m in _models(body) if m != "unknown"]
        elif name == "workers" and by_id[head[0]].kind == "fleet-router":
            fleet_text = "\n".join(body).strip()
        elif name == "workers":
            workers_text = "\n".join(body).strip()
        elif name in samples:
            stamp = float(head[1]) if len(head) > 1 and _number(head[1]) else 0.0
            samples[name][head[0]] = (stamp, "\n".join(body))
        elif name == "journal":
            by_id[head[0]].failure = units.failure_line(body)
    _gpus_of(report, env)
    _loads(report, by_id, samples)
    ports = {u.port: u.name for u in report.units if u.kind == "server" and u.port}
    report.workers = parse_workers(workers_text, ports)
    report.fleet_expected = [Worker(w[0], f"{w[1]} {w[2]}", True) for w in (x.split() for x in fleet_map)
                             if len(w) == 3]
    named = {w.url: w.server for w in report.fleet_expected}
    report.fleet_workers = [Worker(w.url, named.get(w.url, ""), w.healthy, w.load)
                            for w in parse_workers(fleet_text, {})]
    router = next((u for u in report.units if u.kind == "router"), None)
    if router is not None and not report.workers and router.id in samples["metrics"]:
        # /workers did not answer (an older router, or a key it refused): its metrics still say
        health = metrics.router_worker_health(samples["metrics"][router.id][1])
        report.workers = [Worker(url, _port_name(url, ports), ok) for url, ok in health.items()]
    return report


def _port_name(url: str, ports: dict[int, str]) -> str:
    port = url.rsplit(":", 1)[-1].rstrip("/")
    return ports.get(int(port), "") if port.isdigit() else ""


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _gpus_of(report: Report, lines: list[str]) -> None:
    """/etc/gpunode/NAME.env:CUDA_VISIBLE_DEVICES=0,1 -> that server's GPU indices."""
    names = {u.name: u for u in report.units}
    for line in lines:
        path, _, value = line.partition(":CUDA_VISIBLE_DEVICES=")
        u = names.get(posixpath.basename(path).removesuffix(".env"))
        if u is not None:
            u.gpus = [int(x) for x in value.strip().split(",") if x.strip().isdigit()]


def _loads(report: Report, by_id: dict[str, Unit], samples: dict[str, dict[str, tuple[float, str]]]) -> None:
    for uid, (t1, text) in samples["metrics"].items():
        u = by_id[uid]
        if u.kind in ROUTERS:
            u.load_now = metrics.router_load(text)
            continue
        u.load_now = metrics.server_load(text, u.engine)
        second = samples["metrics2"].get(uid)
        if second is not None:
            later = metrics.server_load(second[1], u.engine)
            u.tokens_per_s = metrics.rate(u.load_now.generated, later.generated, second[0] - t1)
            u.load_now = later
        if u.tokens_per_s is None and u.load_now.throughput is not None:
            u.tokens_per_s = u.load_now.throughput
