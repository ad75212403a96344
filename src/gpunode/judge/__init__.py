"""SGLang judges gpunode's plans: a release's own parser and argument checks, without a GPU.

A plan's server arguments are handed to the pin set's sglang (`prepare_server_args`, which runs
ServerArgs.__post_init__ with every cross-flag check of that release) in a judge environment
(env.py), with the device queries answered from the plan's GPU facts (child.py). The verdict
says whether SGLang accepts the arguments, with SGLang's own message when it does not, and what
SGLang chose by itself (attention backend, mamba cache strategy, overlap schedule, ...).

Used by tests/test_sglang_judge.py (every plan the resolver can make, per pin set) and by
`inv kb.refresh` (what SGLang picks, kept as derived data).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from typing import Any

from gpunode.judge.env import CHILD, JudgeEnv, JudgeError


@dataclass(frozen=True)
class Gpu:
    cc: str                 # "9.0"
    name: str
    memory_mib: int
    count: int
    cuda: str               # the pin set's torch CUDA ("13.0")

    def as_json(self) -> dict[str, Any]:
        return {"cc": self.cc, "name": self.name, "memory_mib": self.memory_mib, "count": self.count,
                "cuda": self.cuda}


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]   # the engine's arguments alone (Server.args), as the plan has them
    model_dir: str          # a local folder with the model's config.json, put in for --model-path
    gpu: Gpu

    def argv(self) -> list[str]:
        args = list(self.args)
        folder = os.path.abspath(self.model_dir)   # a relative path would be taken for a hub repository
        if "--model-path" in args:
            args[args.index("--model-path") + 1] = folder
        else:
            args = ["--model-path", folder, *args]
        return args


@dataclass(frozen=True)
class Verdict:
    id: str
    accepted: bool | None   # None: the judge itself could not run the case (a module missing)
    error: str = ""
    where: str = ""
    resolved: dict[str, Any] = field(default_factory=dict)


def judge(env: JudgeEnv, cases: list[Case], timeout: float = 1800) -> list[Verdict]:
    """One verdict per case, in order. Raises JudgeError when the judge process itself fails."""
    if not cases:
        return []
    stdin = "".join(json.dumps({"id": c.id, "argv": c.argv(), "gpu": c.gpu.as_json()}) + "\n" for c in cases)
    proc = subprocess.run([str(env.python), str(CHILD)], input=stdin, capture_output=True, text=True,
                          env=env.environ(), timeout=timeout, cwd="/")
    verdicts: dict[str, Verdict] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            verdicts[d["id"]] = Verdict(d["id"], d["accepted"], d.get("error", ""), d.get("where", ""),
                                        d.get("resolved") or {})
    missing = [c.id for c in cases if c.id not in verdicts]
    if proc.returncode != 0 or missing:
        tail = "\n".join(proc.stderr.strip().splitlines()[-20:])
        raise JudgeError(f"the judge for pin set {env.pinset} ended with {proc.returncode} and left "
                         f"{len(missing)} of {len(cases)} cases without a verdict:\n{tail}")
    return [verdicts[c.id] for c in cases]
