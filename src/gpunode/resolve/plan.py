"""The resolver's output: a plan, plain data with a stable JSON form.

The JSON layout is documented in docs/resolve.md (schema "gpunode.plan/1").
Fields are only ever added; renaming or removing one means a new schema id.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from gpunode.resolve.actions import Action

SCHEMA = "gpunode.plan/1"


@dataclass(frozen=True)
class PlannedPackage:
    requirement: str
    index: str                  # index id from pinsets.yml ("pypi", "pytorch-cu129", ...)
    index_url: str
    pypi_standin: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Indexes:
    index_url: str
    extra_index_urls: tuple[str, ...] = ()
    # packages whose real index CI cannot reach, and the PyPI build tested instead
    stand_ins: tuple[dict[str, str], ...] = ()


@dataclass(frozen=True)
class Toolkit:
    kind: str | None            # "system" | "pip" | None (no JIT toolkit: CPU plan)
    cuda_home: str | None
    nvcc: str | None            # major.minor the JIT compiles with


@dataclass(frozen=True)
class Server:
    name: str
    gpus: tuple[int, ...]
    port: int
    cuda_visible_devices: str | None
    argv: tuple[str, ...]       # full command: venv python, -m module, args
    args: tuple[str, ...]       # the engine's arguments alone
    env: dict[str, str]         # this server's own variables (on top of Plan.env)
    serves_http: bool = True    # False for a multi-node server's non-head ranks: only the head serves HTTP


@dataclass(frozen=True)
class PlannedLock:
    """The full lock a venv installs from (gpunode/compat/locks/, docs/locks.md), or why there is none."""
    file: str                   # "cu13-latest/pylock.x86_64-py312.toml"; "" when there is no lock
    digest: str = ""
    requirements: tuple[str, ...] = ()   # "name==version --hash=sha256:...", the whole closure
    unlocked_why: str = ""      # no lock for this machine and Python
    stale: str = ""             # the lock does not hold the pin set's own pins


@dataclass(frozen=True)
class RouterPlan:
    package: str
    venv: str
    python: str
    argv: tuple[str, ...]
    host: str
    port: int
    policy: str
    worker_urls: tuple[str, ...]
    lock: PlannedLock | None = None


@dataclass(frozen=True)
class Topology:
    kind: str                   # "per-gpu" | "tensor-parallel" | "cpu-slots" | "multi-node" | "mig"
    servers: int
    tp: int
    gpus: tuple[int, ...]
    unused_gpus: tuple[int, ...] = ()
    nnodes: int = 1             # multi-node: how many nodes run this one server, and which one this is
    node_rank: int = 0
    pp: int = 1                 # pipeline-parallel stages (one per node when multinode_parallel: pipeline)


@dataclass(frozen=True)
class PlannedFix:
    id: str
    phase: str
    actions: tuple[Action, ...]        # typed (resolve/actions.py); JSON: {"kind": ..., params...}
    reason: str
    fact: str
    source: str
    rule: str


@dataclass(frozen=True)
class Decision:
    decision: str               # what was decided ("pin set", "attention backend", ...)
    value: str
    reason: str                 # a sentence
    fact: str                   # the fact(s) that drove it, "gpu0.compute_cap=12.0"
    rule: str                   # where the rule lives, "gpus.yml:97 archs[12.0].attention"
    source: str                 # the rule's own source


@dataclass(frozen=True)
class PlannedModel:
    path: str                   # where the servers load it from (the staged copy when weights are staged)
    served_model_name: str      # the name the API answers to (--served-model-name)
    label: str                  # how messages name it
    family: str | None          # compat/models.yml family id
    architectures: tuple[str, ...]
    size_bytes: int             # 0 when unknown
    mtp: bool                   # MTP speculative decoding flags were emitted


@dataclass(frozen=True)
class PlannedWeights:
    """The model's weights on the target: copied from `source` to `dest` before the servers start
    (and again at boot, /dev/shm being emptied), or read where they are."""
    source: str                 # model_source
    dest: str                   # the staged copy; `source` itself when not staged
    stage: bool                 # weights_stage
    skip: tuple[str, ...] = ()  # the source's other copies of the weights, which are not copied (facts/served.py)


@dataclass(frozen=True)
class Plan:
    target: str
    engine: str
    engine_version: str
    pinset: str
    pinset_status: str
    python: str
    venv: str
    packages: tuple[PlannedPackage, ...]
    indexes: Indexes
    toolkit: Toolkit
    env: dict[str, str]
    topology: Topology
    servers: tuple[Server, ...]
    router: RouterPlan | None
    fixes: tuple[PlannedFix, ...]
    model: PlannedModel
    decisions: tuple[Decision, ...]
    warnings: tuple[str, ...]
    facts: dict[str, Any] = field(default_factory=dict)   # what the plan was made from (report.facts_view)
    lock: PlannedLock | None = None
    kernel_package: str | None = None   # the pin set's kernel distribution ("sglang-kernel"), None without one
    weights: PlannedWeights | None = None  # None without model_source (a plan from saved facts or a pasted report)
    schema: str = field(default=SCHEMA)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        # schema first, so a reader sees the version before anything else
        return {"schema": out.pop("schema"), **out}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def server_env(self, server: Server) -> dict[str, str]:
        """The whole environment `server` runs with: every server's `env`, its own, its port and GPUs."""
        env = {**self.env, **server.env, "PORT": str(server.port)}
        if server.cuda_visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = server.cuda_visible_devices
        return env

    def decision(self, name: str) -> Decision | None:
        return next((d for d in self.decisions if d.decision == name), None)
