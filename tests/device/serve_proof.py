"""gpunode's rendered server units, started and measured on the lent H100 (issue 34, item 3).

Run by hand on the device machine (tests/device/README.md says how; there is no systemd and
no registry there). Phases, each one call:
  models: the tiny models (tiny_models.py) and the image's package versions;
  install: gpunode's probe;
           the engine venv (the machine's Python, its torch through a .pth) with the cu13-b
           lock's packages that the image lacks or has at another version, pip --no-index
           --no-deps; the cuda_fixes role through the real engine;
  serve CASE...: per case, facts + resolve + the weights role (staging) + the servers role's
           unit and env file, rendered; ExecStart started as systemd would (the env file, a
           plain PATH, WorkingDirectory), gpunode's Ready step, real OpenAI requests, the
           bench client at concurrency 1/16/64, then stop and start again for a warm start.
Everything goes into OUT (a folder on the machine): <phase>.json, serve-<case>.json, facts-*/ and log.txt;
the command line packs it for the device tool's $OUT (8 files at most).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO)]

from gpunode import roles  # noqa: E402
from gpunode.bench.runner import Spec, bench  # noqa: E402
from gpunode.engine import run_target  # noqa: E402
from gpunode.facts import snapshot  # noqa: E402
from gpunode.facts.parse import parse  # noqa: E402
from gpunode.facts.probe import gather  # noqa: E402
from gpunode.resolve import resolve  # noqa: E402
from gpunode.steps.files import File, Template  # noqa: E402
from gpunode.transport.local import LocalTransport  # noqa: E402
from tests.unit import systemd_parse  # noqa: E402

PINSET = "cu13-b"
IMAGE_PY = "/opt/torch/.venv/bin/python3"
TORCH_SITE = "/opt/torch/.venv/lib/python3.12/site-packages"
WORK = Path("/root/proof")
MODELS = WORK / "models"
# NVLink multicast stays off in every process (the lent machine's rule, KINDS.md).
NO_NVLS = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"  # systemd's PATH for services
# Wheels of the lock not carried: never imported serving Qwen3/Qwen3.5 on sm_90 (tests/data/device/h100-serve).
NOT_CARRIED = ("tokenspeed-triton", "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base",
               "nvidia-cutlass-dsl-libs-core", "nvidia-cutlass-dsl-libs-cu12", "nvidia-cutlass-dsl-libs-cu13",
               "tilelang", "z3-solver", "nvidia-mathdx")
CASES = {"dense": ("tiny-qwen3", {}), "hybrid": ("tiny-qwen36", {}),
         "hybrid-no-buffer": ("tiny-qwen36", {"mamba_strategy": "no_buffer"}),
         "hybrid-text": ("tiny-qwen36-text", {}),
         "mtp": ("tiny-qwen36-mtp", {}), "mtp-off": ("tiny-qwen36-mtp", {"mtp": "false"}),
         "hybrid-moe": ("tiny-qwen36-moe", {}), "mla": ("tiny-dsv3", {}), "gpt-oss": ("tiny-gpt-oss", {})}
# A first start that runs out of GPU memory is tried again at these fractions (issue 42: the MTP plan),
# each one recorded, so that one call measures where the plan starts.
OOM_RETRY = (0.7, 0.6)
LOG: list[str] = []


def say(msg: str) -> None:
    line = f"[{time.strftime('%H:%M:%S')}] {msg}"
    LOG.append(line)
    print(line, flush=True)


def sh(argv: list[str], **kw) -> dict:
    t = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    return {"argv": argv, "rc": r.returncode, "s": round(time.monotonic() - t, 1),
            "stdout": r.stdout[-4000:], "stderr": r.stderr[-4000:]}


def variables(model: str, extra: dict) -> dict:
    return {**roles.defaults(), "pinset": PINSET, "model_source": str(MODELS / model), "servers_router": False,
            **extra}


def plan_for(t: LocalTransport, model: str, extra: dict, save_to: Path | None = None):
    raw = gather(t, model_path=str(MODELS / model), venv=None)
    if save_to is not None:
        snapshot.save(raw, save_to)
    facts = parse(raw)
    v = variables(model, extra)
    return facts, v, resolve(facts, v)


def wheel_name(path: Path) -> tuple[str, str]:
    name, version = path.name.split("-")[:2]
    return name.replace("_", "-").lower(), version


def image_versions() -> dict[str, str]:
    code = ("import json,importlib.metadata as m;print(json.dumps({d.metadata['Name'].lower().replace('_','-'):"
            "d.version for d in m.distributions()}))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # gpunode's own deps are no image package
    return json.loads(subprocess.run([IMAGE_PY, "-c", code], capture_output=True, text=True, check=True,
                                     env=env).stdout)


def install(plan, wheels: Path) -> dict:
    venv = Path(plan.venv)
    subprocess.run(["rm", "-rf", str(venv)], check=True)
    log = [sh([IMAGE_PY, "-m", "venv", str(venv)])]
    site = venv / "lib" / "python3.12" / "site-packages"
    (site / "zz-machine-torch.pth").write_text(TORCH_SITE + "\n")  # after the venv's own: the lock's wins
    have = image_versions()
    chosen, same = [], []
    for w in sorted(wheels.glob("*.whl")):
        name, version = wheel_name(w)
        (same if have.get(name) == version else chosen).append((name, version, w))
    # Without PYTHONPATH: gpunode's own deps there (cffi, cryptography, pycparser) would read as installed.
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    log.append(sh([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                   "--no-compile", *[str(w) for _, _, w in chosen]], env=clean))
    # The image's same-version CUDA wheels (cuda-runtime, cublas, ...) live in its own nvidia/cu13 tree;
    # a locked install puts them in the venv's, where CUDA_HOME points and flashinfer's JIT looks for
    # cuda_runtime.h and cublasLt.h: link what the venv's tree lacks.
    log.append(sh(["cp", "-rsn", f"{TORCH_SITE}/nvidia/cu13/.", str(site / "nvidia" / "cu13") + "/"]))
    ninja = venv / "bin" / "ninja"
    if not ninja.exists():
        ninja.symlink_to("/opt/torch/.venv/bin/ninja")  # flashinfer's JIT runs ninja from the venv's bin
    return {"installed": [f"{n}=={v}" for n, v, _ in chosen],
            "image_had_same": [f"{n}=={v}" for n, v, _ in same],
            "replaced_image_versions": {n: have[n] for n, _, _ in chosen if n in have},
            "not_carried": list(NOT_CARRIED), "log": log}


def engine_run(t: LocalTransport, names: list[str], ctx) -> dict:
    events: list = []
    recap = run_target(t, roles.build(names, ctx), emit=events.append, state_dir="/var/lib/gpunode")
    return {"roles": names, "ok": recap.ok, "changed": recap.changed, "failed": recap.failed, "error": recap.error}


def phase_models() -> dict:
    res = {"models": sh([IMAGE_PY, str(HERE / "tiny_models.py"), str(MODELS)], env={**os.environ, **NO_NVLS}),
           "image_pip": image_versions()}
    say(f"models rc={res['models']['rc']} {res['models']['stdout'][-1500:]} {res['models']['stderr'][-2500:]}")
    return res


def phase_install(args, t: LocalTransport) -> dict:
    res: dict = {"nvidia_smi": sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap",
                                   "--format=csv"]), "uname": sh(["uname", "-r"]),
                 "systemctl": sh(["sh", "-c", "command -v systemctl || echo none"])}
    facts, v, plan = plan_for(t, "tiny-qwen3", {}, args.out / "facts-dense")
    res["plan"] = plan.to_dict()
    say("install")
    res["install"] = install(plan, args.wheels)
    say(f"install rc={res['install']['log'][-1]['rc']} {len(res['install']['installed'])} wheels")
    ctx = roles.RoleContext(target="h100", vars=v, facts=facts, plan=plan)
    res["cuda_fixes"] = engine_run(t, ["cuda_fixes"], ctx)
    say(f"cuda_fixes {res['cuda_fixes']}")
    res["imports"] = sh([f"{plan.venv}/bin/python", "-c", "import sglang, sgl_kernel, flashinfer, transformers, "
                         "torch; print(sglang.__version__, flashinfer.__version__, transformers.__version__, "
                         "torch.__version__, torch.version.cuda)"], env={**os.environ, **plan.env, **NO_NVLS})
    say(f"imports {res['imports']['stdout'].strip()} {res['imports']['stderr'][-600:]}")
    return res


def phase_venvs(uv: str, reps: int = 3) -> dict:
    """The venv an engine install starts from: `python -m venv` (pip seeded) against `uv venv`, on this host."""
    runs: dict[str, list[float]] = {"python -m venv": [], "uv venv": []}
    for i in range(reps):
        for name, argv in (("python -m venv", [IMAGE_PY, "-m", "venv"]),
                           ("uv venv", [uv, "venv", "-q", "--python", IMAGE_PY])):
            dest = WORK / f"venv-{i}-{name.replace(' ', '_')}"
            subprocess.run(["rm", "-rf", str(dest)], check=True)
            r = sh([*argv, str(dest)], env={**os.environ, "UV_OFFLINE": "1"})
            if r["rc"] != 0:
                return {"error": r}
            runs[name].append(r["s"])
    best = {k: min(v) for k, v in runs.items()}
    return {"runs_s": runs, "best_s": best,
            "ratio_python_over_uv": round(best["python -m venv"] / max(best["uv venv"], 0.05), 1)}


def rendered(ctx) -> tuple[list[str], dict[str, str], str, str]:
    steps = {s.id: s for rp in roles.build(["servers"], ctx) for s in rp.steps}
    unit = next(s for k, s in steps.items() if isinstance(s, Template) and k.endswith("gpunode-gpu0.service"))
    env_file = next(s for k, s in steps.items() if isinstance(s, File) and k == "file:/etc/gpunode/gpu0.env")
    env = systemd_parse.env_file(str(env_file.content))
    settings = systemd_parse.settings(unit.content)
    argv = systemd_parse.exec_words(next(v for _, k, v in settings if k == "ExecStart"), env=env)
    workdir = next(v for _, k, v in settings if k == "WorkingDirectory")
    for path, text in ((env_file.path, str(env_file.content)), (unit.path, unit.content)):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    return argv, env, workdir, unit.content


class Server:
    """One unit's ExecStart, run the way systemd runs a Type=simple service, in its own session."""

    def __init__(self, argv: list[str], env: dict[str, str], workdir: str, log: Path, unit: str):
        self.argv, self.env, self.workdir, self.log, self.unit = argv, env, workdir, log, unit
        self.proc: subprocess.Popen | None = None

    def start(self) -> float:
        Path(self.workdir).mkdir(parents=True, exist_ok=True)
        env = {"PATH": SYSTEMD_PATH, "LANG": "C.UTF-8", **self.env, **NO_NVLS}
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.argv, env=env, cwd=self.workdir, stdin=subprocess.DEVNULL,
                                     stdout=self.log.open("a"), stderr=subprocess.STDOUT, start_new_session=True)
        pid = Path(f"/run/gpunode-shim/{self.unit}.pid")
        pid.write_text(str(self.proc.pid))
        proc = self.proc

        def reap() -> None:  # an exited child stays a zombie (kill -0 succeeds) until waited for
            proc.wait()
            pid.unlink(missing_ok=True)

        threading.Thread(target=reap, daemon=True).start()
        return t0

    def stop(self) -> float:
        """KillMode=mixed: SIGTERM to the main process, then SIGKILL to what is left after TimeoutStopSec."""
        assert self.proc is not None
        t = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(60)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        return round(time.monotonic() - t, 1)


def ready(t: LocalTransport, ctx, t0: float) -> dict:
    ready_step = next(s for rp in roles.build(["servers"], ctx) for s in rp.steps if s.id.startswith("ready:"))
    ready_step.grace_s = 420  # a failed start shows through the pid check well before this
    seen: dict = {}
    ready_step.on_line = lambda line: seen.setdefault("health_ok_s", round(time.monotonic() - t0, 1)) \
        if line.startswith("@@ready") else None
    try:
        ready_step.apply(t)
        return {"ok": True, **seen, "ready_s": round(time.monotonic() - t0, 1)}
    except Exception as e:  # StepError: the evidence is the point
        return {"ok": False, **seen, "error": str(e)[-3000:], "s": round(time.monotonic() - t0, 1)}


def ask(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    t = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            out = json.loads(r.read())
        return {"ok": True, "s": round(time.monotonic() - t, 3), "response": out}
    except Exception as e:
        return {"ok": False, "error": repr(e)[-1500:]}


def requests(base: str, model: str) -> dict:
    return {"completions": ask(f"{base}/v1/completions", {"model": model, "prompt": "def fibonacci(n):",
                                                          "max_tokens": 32, "temperature": 0}),
            "chat": ask(f"{base}/v1/chat/completions", {"model": model, "max_tokens": 32, "temperature": 0,
                                                        "messages": [{"role": "user", "content": "Say hello."}]})}


def gpu_memory() -> dict:
    """The GPU's memory in use and in all (MiB), and each compute process's, as nvidia-smi reports them."""
    q = sh(["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits"])
    apps = sh(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"])
    used, total = (int(x) for x in q["stdout"].split(",")[:2]) if q["rc"] == 0 else (None, None)
    return {"used_mib": used, "total_mib": total, "apps": apps["stdout"].strip().splitlines()}


def out_of_memory(log: Path) -> bool:
    text = log.read_text(errors="replace") if log.exists() else ""
    return "OutOfMemoryError" in text or "CUDA out of memory" in text or "Not enough GPU memory" in text


def log_excerpt(path: Path) -> list[str]:
    lines = path.read_text(errors="replace").splitlines()
    keys = ("server_args", "Load weight", "KV Cache", "Capture", "cuda graph", "fired up", "Error", "error",
            "Traceback", "attention_backend", "mamba", "Uvicorn", "max_total_num_tokens", "memory", "Mamba Cache",
            "avail mem", "OutOfMemory", "draft", "speculative")
    picked = [ln[:600] for ln in lines if any(k in ln for k in keys)]
    return picked[:60] + ["..."] + lines[-40:]


def written_since(marker: Path, skip: tuple[str, ...]) -> dict[str, int]:
    """Bytes of the files written after `marker`, by folder (four levels deep): where a start's caches land."""
    prune = ("/proc", "/sys", "/dev", *skip)
    expr = [x for p in prune for x in ("-path", p, "-o")][:-1]
    r = subprocess.run(["find", "/", "(", *expr, ")", "-prune", "-o", "-type", "f", "-newer", str(marker),
                        "-printf", "%s %p\n"], capture_output=True, text=True)
    sizes: dict[str, int] = {}
    for line in r.stdout.splitlines():
        size, _, path = line.partition(" ")
        key = "/".join(path.split("/")[:5])
        sizes[key] = sizes.get(key, 0) + int(size)
    return dict(sorted(sizes.items(), key=lambda kv: -kv[1]))


def as_after_reboot(keep: tuple[str, ...]) -> dict:
    """What a reboot takes: /tmp (tmpfs or cleaned at boot on Debian and Ubuntu) and the page cache.
    /dev/shm is kept: the weights role stages it again after a reboot, which is not a server start."""
    gone = []
    for p in Path("/tmp").iterdir():
        if not any(str(p) == k or k.startswith(str(p) + "/") for k in keep):
            subprocess.run(["rm", "-rf", str(p)], check=False)
            gone.append(str(p))
    drop = sh(["sh", "-c", "sync && echo 3 > /proc/sys/vm/drop_caches"])
    return {"removed": gone, "page_cache_dropped": drop["rc"] == 0, "drop": drop}


def unrelated_upgrade(venv: str, wheels: Path) -> dict:
    """An upgrade of a package no kernel depends on: reinstalled, new files and mtimes in the venv."""
    wheel = next(w for name in ("tqdm", "idna", "certifi") for w in sorted(wheels.glob(f"{name}-*.whl")))
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return sh([f"{venv}/bin/python", "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--force-reinstall",
               str(wheel)], env=clean)


# The starts after the first two: (name, what happens before it)
LATER_STARTS = ("after-reboot", "after-unrelated-upgrade")


def serve(t: LocalTransport, case: str, out: Path, bench_on: bool, later: bool = False,
          wheels: Path = Path("/root/wheels")) -> dict:
    """The case as rendered; where its first start runs out of GPU memory, again at each OOM_RETRY fraction."""
    model, extra = CASES[case]
    res = serve_once(t, case, out, bench_on, later, wheels, extra)
    tried = []
    for fraction in OOM_RETRY:
        if res.get("starts", [{}])[0].get("ok") or not res.get("out_of_memory"):
            break
        tried.append({k: res.get(k) for k in ("argv", "starts", "log_excerpt", "server_args", "gpu_memory")})
        say(f"{case}: out of GPU memory as rendered; mem_fraction {fraction}")
        res = serve_once(t, case, out, bench_on, later, wheels, {**extra, "mem_fraction": fraction})
    if tried:
        res["out_of_memory_before"] = tried
    return res


def serve_once(t: LocalTransport, case: str, out: Path, bench_on: bool, later: bool, wheels: Path,
               extra: dict) -> dict:
    model = CASES[case][0]
    facts, v, plan = plan_for(t, model, extra, out / f"facts-{case}")
    ctx = roles.RoleContext(target="h100", vars=v, facts=facts, plan=plan)
    res: dict = {"case": case, "model": model, "vars": extra, "plan_argv": list(plan.servers[0].argv)}
    res["weights"] = engine_run(t, ["weights"], ctx)
    say(f"{case}: weights {res['weights']}")
    argv, env, workdir, unit = rendered(ctx)
    res.update(argv=argv, env=env, workdir=workdir, unit=unit)
    log = WORK / f"{case}-{extra.get('mem_fraction', 'plan')}.log"
    res["gpu_memory_before"] = gpu_memory()
    server = Server(argv, env, workdir, log, "gpunode-gpu0.service")
    starts = []
    marker = WORK / "before-first-start"
    marker.write_text("")
    keep = (str(REPO), str(WORK), str(out), *([os.environ["OUT"]] if os.environ.get("OUT") else []))
    for n in range(2 + (len(LATER_STARTS) if later else 0)):
        if n >= 2:
            what = LATER_STARTS[n - 2]
            res.setdefault("before", {})[what] = (as_after_reboot(keep) if what == "after-reboot"
                                                  else unrelated_upgrade(plan.venv, wheels))
            say(f"{case}: {what}: {str(res['before'][what])[:300]}")
        t0 = server.start()
        r = ready(t, ctx, t0)
        starts.append(r)
        say(f"{case}: start {n + 1} {r}")
        if not r["ok"]:
            break
        if n == 0:
            res["gpu_memory"] = {"ready": gpu_memory()}
            if later:  # a walk of the whole disk: only where the caches' places are the question
                res["written_by_first_start"] = written_since(marker, keep)
                say(f"{case}: written by the first start {list(res['written_by_first_start'].items())[:12]}")
            res["requests"] = requests(f"http://127.0.0.1:{plan.servers[0].port}", ctx.plan.model.served_model_name)
            say(f"{case}: requests ok={[x['ok'] for x in res['requests'].values()]}")
            if bench_on:
                try:
                    res["bench"] = bench(t, plan, Spec(concurrency=[1, 16, 64], phases=("servers",)))
                    res["gpu_memory"]["after_bench"] = gpu_memory()
                    say(f"{case}: bench " + ", ".join(f"c={x['concurrency']} {x['total'].get('output_tok_s')}"
                                                      for x in res["bench"]["runs"]))
                except Exception as e:
                    res["bench_error"] = str(e)[-3000:]
                    say(f"{case}: bench failed {res['bench_error'][-500:]}")
        res.setdefault("stop_s", []).append(server.stop())
    if server.proc and server.proc.poll() is None:
        server.stop()
    res["starts"] = starts
    res["out_of_memory"] = out_of_memory(log)
    res["log_excerpt"] = log_excerpt(log)
    res["server_args"] = [ln for ln in log.read_text(errors="replace").splitlines() if "server_args=" in ln]
    return res


def machine() -> None:
    """What every script here sets up first on the lent machine. It has no systemd: Ready's crash check
    (`systemctl is-failed UNIT`) reads the pid file Server keeps instead, through a systemctl shim on PATH."""
    os.environ.update(NO_NVLS)
    shim = Path("/run/gpunode-shim")
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "systemctl").write_text('#!/bin/sh\n[ "$1" = is-failed ] || exit 1\n'
                                    '[ -f "/run/gpunode-shim/$3.pid" ] && exit 1 || exit 0\n')
    (shim / "systemctl").chmod(0o755)
    os.environ["PATH"] = f"{shim}:{os.environ['PATH']}"
    WORK.mkdir(parents=True, exist_ok=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("phase", choices=("models", "install", "serve", "venvs"))
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--wheels", type=Path, default=Path("/root/wheels"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--uv", default="/root/uv/bin/uv", help="the uv binary (venvs phase)")
    ap.add_argument("--later-starts", action="store_true", help="also start after a reboot's losses and after "
                    "an unrelated upgrade (where the caches live)")
    args = ap.parse_args()
    machine()
    args.out.mkdir(parents=True, exist_ok=True)
    t = LocalTransport("h100")
    if args.phase == "models":
        res = phase_models()
    elif args.phase == "venvs":
        res = phase_venvs(args.uv)
        say(f"venvs {res}")
    elif args.phase == "install":
        res = phase_install(args, t)
    else:
        res = {}
        cases = list(args.cases)
        for case in cases:
            try:
                res[case] = serve(t, case, args.out, not args.no_bench, args.later_starts, args.wheels)
            except Exception as e:
                import traceback
                res[case] = {"error": traceback.format_exc()[-3000:]}
                say(f"{case}: {e!r}")
            if case == "hybrid" and not all(x.get("ok") for x in res[case].get("starts", [{}])):
                cases.append("hybrid-text")  # the same text model as Qwen3_5ForCausalLM, no vision tower
            (args.out / f"serve-{case}.json").write_text(json.dumps(res[case], indent=1, default=str))
            (args.out / "log.txt").write_text("\n".join(LOG) + "\n")
    (args.out / f"{args.phase}.json").write_text(json.dumps(res, indent=1, default=str))
    (args.out / "log.txt").write_text("\n".join(LOG) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
