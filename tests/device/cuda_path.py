"""The CUDA path of gpunode on a real GPU machine, through the local transport (issue 11).

Run on the lent H200 (tests/device/README.md says how). In order:
1. facts: gpunode's probe on the machine, saved as a snapshot;
2. plan: the resolver on those facts for the pin set whose torch the machine has (2.11);
3. venv: the plan's venv, with the plan's pip CUDA packages and flashinfer installed offline
   from carried wheels (the engine role's pip-nvcc action, done by hand: no registry there);
   torch comes from the machine's own venv through a .pth file;
4. steps: the cuda_fixes role's steps, each probed and checked before, applied through the
   real engine, probed and checked after (raw probe outputs kept for the unit tests);
5. jit: flashinfer_decode.py in three environments, each with an empty JIT workspace:
   `without` (a container with no system CUDA toolkit and none of the fixes),
   `with` (the same container after the fixes: the plan's environment), and
   `system` (the machine as it is, its /usr/local/cuda visible, no fixes).
   "A container with no system toolkit" is made by mounting an empty folder over
   /usr/local/cuda in a private mount namespace.
Everything goes into $OUT/results.json and $OUT/facts.tar.gz.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO)]

from gpunode import roles  # noqa: E402
from gpunode.engine import run_target  # noqa: E402
from gpunode.facts import snapshot  # noqa: E402
from gpunode.facts.parse import parse  # noqa: E402
from gpunode.facts.probe import gather  # noqa: E402
from gpunode.resolve import resolve  # noqa: E402
from gpunode.resolve.toolkit import jit_env  # noqa: E402
from gpunode.steps.base import Probe  # noqa: E402
from gpunode.transport.local import LocalTransport  # noqa: E402
from tests.unit.resolve_facts import QWEN36  # noqa: E402

PINSET = "cu13-b"  # the pin set whose torch (2.11.0, CUDA 13.0) the machine's image has
TORCH_SITE = "/opt/torch/.venv/lib/python3.12/site-packages"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def sh(argv: list[str], **kw) -> dict:
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    return {"argv": argv, "rc": r.returncode, "stdout": r.stdout[-6000:], "stderr": r.stderr[-6000:]}


def outcome(o) -> dict:
    return {"type": type(o).__name__, "text": getattr(o, "summary", None) or getattr(o, "reason", "")}


def run_steps(t: LocalTransport, role_plans) -> dict:
    steps = [s for rp in role_plans for s in rp.steps]
    out: dict = {"steps": []}
    for s in steps:
        r = t.run(s.probe())
        p = Probe(r.exit_code, r.stdout)
        out["steps"].append({"id": s.id, "title": s.title, "before": {"exit": p.exit_code, "output": p.output,
                                                                    "check": outcome(s.check(p))}})
    events: list = []
    recap = run_target(t, role_plans, emit=events.append, state_dir="/var/lib/gpunode")
    out["engine"] = {"ok": recap.ok, "changed": recap.changed, "failed": recap.failed, "error": recap.error,
                     "events": [getattr(e, "__dict__", str(e)) for e in events]}
    for s, rec in zip(steps, out["steps"], strict=True):
        r = t.run(s.probe())
        p = Probe(r.exit_code, r.stdout)
        rec["after"] = {"exit": p.exit_code, "output": p.output, "check": outcome(s.check(p))}
    return out


def install(plan, wheels: Path) -> dict:
    venv = Path(plan.venv)
    log = [sh(["/opt/torch/.venv/bin/python3", "-m", "venv", str(venv)])]
    site = venv / "lib" / "python3.12" / "site-packages"
    (site / "zz-machine-torch.pth").write_text(TORCH_SITE + "\n")
    # flashinfer's ninja dependency, which a full install would put into the venv's bin
    ninja = venv / "bin" / "ninja"
    if not ninja.exists():
        ninja.symlink_to("/opt/torch/.venv/bin/ninja")
    nvcc = next(a.packages for f in plan.fixes if f.id == "pip-nvcc" for a in f.actions
                if a.kind == "pip_install")
    planned = [p.requirement for p in plan.packages if p.requirement.startswith(("nvidia-", "flashinfer"))]
    reqs = list(dict.fromkeys([*nvcc, *planned, "nvidia-cuda-runtime==13.0.96", "apache-tvm-ffi"]))
    reqs = [r.replace("[cu13]", "") for r in reqs]  # the extra's cutlass-dsl is not needed for this kernel
    log.append(sh([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index", "--no-deps",
                   "--ignore-installed", "--find-links", str(wheels), *reqs]))
    return {"requirements": reqs, "log": log}


def jit(mode: str, plan, venv_python: str) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"jit-{mode}-"))
    # An activated venv in every mode (its bin holds ninja); "with" adds the plan's environment.
    env = {"PATH": f"{plan.venv}/bin:{BASE_PATH}", "HOME": str(work / "home"),
           "FLASHINFER_WORKSPACE_BASE": str(work / "ws"), "LANG": "C.UTF-8", "NCCL_NVLS_ENABLE": "0"}
    if mode == "with":
        env.update(plan.env)
        env.update(jit_env(str(work / "ws")))
        env["HOME"] = str(work / "home")
    hide = "" if mode == "system" else "mkdir -p /tmp/empty-cuda && mount --bind /tmp/empty-cuda /usr/local/cuda && "
    script = f"{hide}exec {venv_python} {HERE / 'flashinfer_decode.py'}"
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], env=env,
                       capture_output=True, text=True, timeout=900)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    result = json.loads(lines[-1]) if lines else {"ok": False, "error": "no result line"}
    result.update(mode=mode, rc=r.returncode, stderr_tail=r.stderr[-4000:])
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheels", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    t = LocalTransport("h200")
    res: dict = {}
    raw = gather(t, venv=None)
    with tempfile.TemporaryDirectory() as d:
        snapshot.save(raw, Path(d) / "facts")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(Path(d) / "facts", arcname="facts")
        (args.out / "facts.tar.gz").write_bytes(buf.getvalue())
    facts = parse(raw)
    facts = replace(facts, model=QWEN36)
    plan = resolve(facts, {**roles.defaults(), "pinset": PINSET})
    res["plan"] = plan.to_dict()
    res["install"] = install(plan, args.wheels)
    res["tools"] = {"nvcc_pip": sh([f"{plan.toolkit.cuda_home}/bin/nvcc", "--version"]),
                    "nvcc_system": sh(["/usr/local/cuda/bin/nvcc", "--version"]),
                    "ldconfig_libcuda": sh(["sh", "-c", "ldconfig -p | grep libcuda; ls -l /usr/local/nvidia/lib64 "
                                                        "2>/dev/null | grep libcuda; mount | grep nvidia"])}
    ctx = roles.RoleContext(target="h200", vars={**roles.defaults(), "pinset": PINSET}, facts=facts, plan=plan)
    res["cuda_fixes"] = run_steps(t, roles.build(["cuda_fixes"], ctx))
    py = f"{plan.venv}/bin/python"
    res["jit"] = {mode: jit(mode, plan, py) for mode in ("without", "with", "system")}
    (args.out / "results.json").write_text(json.dumps(res, indent=1, default=str))
    print(json.dumps({m: {k: r.get(k) for k in ("ok", "first_call_s", "max_abs_err", "error")}
                      for m, r in res["jit"].items()}, indent=1))
    print("engine:", res["cuda_fixes"]["engine"]["error"] or "ok", "changed", res["cuda_fixes"]["engine"]["changed"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
