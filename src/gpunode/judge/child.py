"""Runs inside a judge environment (gpunode/judge/env.py), never inside gpunode.

Reads cases as JSON lines on stdin, one per plan server: {"id", "argv", "gpu": {"cc", "name",
"memory_mib", "count", "cuda"}}. Writes one JSON line per case on stdout: {"id", "accepted",
"error", "where", "resolved"}, where `resolved` holds the ServerArgs fields SGLang filled in for
itself (the attention backend it picked, the mamba strategy, the overlap schedule, ...).

What is real: sglang's own parser and ServerArgs.__post_init__ of the installed release, with the
release's own dependencies at the versions its lock names. What stands in, and why:
- the device queries: torch.cuda's capability, name, count and memory answer with the case's GPU,
  and `nvidia-smi --query-gpu=memory.total` (which sglang runs for the memory) is a script that
  prints the case's memory. torch.version.cuda is the pin set's CUDA.
- GPU-only kernel packages (sgl_kernel, flashinfer, ...): their native libraries need libcuda and
  a GPU to load. sglang imports them at module level when it sees CUDA, and argument checks never
  call into them, so an importable stand-in takes their place (KERNEL_PACKAGES below).

sglang computes some device facts once at import time (module-level `_is_sm100_supported`), so the
cases of each compute capability run in a forked process (as many at once as there are cores) that
imports sglang after its stubs are set; within it, each case sets the GPU's name, memory and count
and clears sglang's cached answers.
This file uses the standard library, torch and sglang only: it runs under the judge's Python.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import json
import os
import sys
import tempfile
import traceback
import types

# The import names of the lock's GPU-only packages that the environment leaves out (env.py sets it).
KERNEL_PACKAGES = tuple(n for n in os.environ.get("GPUNODE_JUDGE_STANDINS", "").split(",") if n)
# What CI's judge shares with the node's own check (nodecheck.py, beside this file): SGLang's
# parser and checks on one argv and how a verdict reads; here the device queries are stood in.
_NODE = importlib.util.spec_from_file_location("gpunode_nodecheck",
                                               os.path.join(os.path.dirname(__file__), "nodecheck.py"))
assert _NODE is not None and _NODE.loader is not None
nodecheck = importlib.util.module_from_spec(_NODE)
_NODE.loader.exec_module(nodecheck)
RESOLVED = nodecheck.RESOLVED
# A folder: each process writes there which files of the pin set's packages it imported and which
# distributions' metadata it read (bench/judge_imports.py: what the argument checks need installed).
IMPORTS = os.environ.get("GPUNODE_JUDGE_IMPORTS", "")
_METADATA: set[str] = set()

class _Anything(types.ModuleType):
    """A stand-in module: any attribute is a harmless callable, submodules import."""

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Thing(f"{self.__name__}.{name}")


class _Thing:
    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *args: object, **kwargs: object) -> object:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]          # used as a decorator
        return _Thing(self._name + "()")

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Thing(f"{self._name}.{name}")

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (object,)

    def __iter__(self):
        return iter(())

    def __bool__(self) -> bool:
        return False


class _StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in KERNEL_PACKAGES:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Anything(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0"
        return module

    def exec_module(self, module) -> None:
        pass


_GPU: dict = {}      # the case being judged; the stubs below answer from it


def _fake_nvidia_smi(folder: str) -> None:
    """`nvidia-smi --query-gpu=memory.total` answers one line per GPU of the case, as the real one does."""
    path = os.path.join(folder, "nvidia-smi")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("#!/bin/sh\n" + "".join(f"echo {int(_GPU['memory_mib'])}\n" for _ in range(int(_GPU["count"]))))
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)


def _stub_device(torch) -> str:
    def capability(device=None) -> tuple[int, int]:
        major, minor = _GPU["cc"].split(".")
        return int(major), int(minor)

    def properties(device=None) -> object:
        major, minor = capability()
        return types.SimpleNamespace(name=_GPU["name"], total_memory=int(_GPU["memory_mib"]) << 20, major=major,
                                     minor=minor, multi_processor_count=int(_GPU.get("sms") or 132),
                                     is_integrated=False, L2_cache_size=50 << 20, uuid="GPU-judge", warp_size=32)

    cuda = torch.cuda
    cuda.is_available = lambda: True
    cuda.device_count = lambda: int(_GPU["count"])
    cuda.current_device = lambda: 0
    cuda.get_device_capability = capability
    cuda.get_device_name = lambda device=None: _GPU["name"]
    cuda.get_device_properties = properties
    cuda.mem_get_info = lambda device=None: (int(_GPU["memory_mib"]) << 20,) * 2
    torch.version.cuda = _GPU["cuda"]
    torch.version.hip = None
    folder = tempfile.mkdtemp(prefix="gpunode-judge-")
    os.environ["PATH"] = folder + os.pathsep + os.environ["PATH"]
    return folder


def _forget_device_answers() -> None:
    """sglang caches some answers (lru_cache); a case with another GPU must not see the last one's."""
    for name, module in list(sys.modules.items()):
        if name.startswith("sglang") and module is not None:
            for value in list(vars(module).values()):
                clear = getattr(value, "cache_clear", None)
                if callable(clear) and getattr(value, "__module__", "") == name:
                    clear()


def _stand_in_fakes(torch) -> None:
    """A stand-in kernel package registers no operators, so the fake (meta) implementations sglang
    registers for them (for torch.compile) have nothing to attach to: skip those alone."""
    real = torch.library.register_fake

    def register_fake(op, func=None, /, *args, **kwargs):
        name = op if isinstance(op, str) else ""
        if name.split("::")[0] in KERNEL_PACKAGES:
            return func if func is not None else (lambda f: f)
        return real(op, func, *args, **kwargs) if func is not None else real(op, *args, **kwargs)

    torch.library.register_fake = register_fake


def _judge(prepare, case: dict) -> dict:
    saved = dict(os.environ)
    try:
        verdict = nodecheck.sglang_verdict(prepare, case["argv"])
        verdict.pop("check", None)
        return {"id": case["id"], **verdict}
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _emit(verdict: dict) -> None:
    """One line in one write: the groups' processes share stdout, and a write of less than
    PIPE_BUF bytes to a pipe is never interleaved with another."""
    verdict["error"] = verdict["error"][:1500]
    line = json.dumps(verdict)
    if len(line) >= 4000:
        verdict["resolved"] = {}
        line = json.dumps(verdict)
    os.write(1, (line + "\n").encode())


def _run_group(cases: list[dict]) -> None:
    import torch

    _GPU.update(cases[0]["gpu"])
    folder = _stub_device(torch)
    _fake_nvidia_smi(folder)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            from sglang.srt.server_args import prepare_server_args
    except BaseException as exc:
        for case in cases:
            _emit({"id": case["id"], "accepted": None, "where": nodecheck.where(exc), "resolved": {},
                   "error": f"importing sglang.srt.server_args failed: {type(exc).__name__}: {exc}"})
        return
    for case in cases:
        _GPU.clear()
        _GPU.update(case["gpu"])
        _fake_nvidia_smi(folder)
        _forget_device_answers()
        _emit(_judge(prepare_server_args, case))


def _watch_metadata() -> None:
    """Every importlib.metadata lookup by name (version(), metadata(), requires(), ...) goes through
    Distribution.from_name: a package read that way must be installed though nothing imports it."""
    import importlib.metadata as md

    real = md.Distribution.from_name.__func__     # type: ignore[attr-defined]

    def from_name(cls, name):
        _METADATA.add(name)
        return real(cls, name)

    md.Distribution.from_name = classmethod(from_name)  # type: ignore[method-assign,assignment]


def _write_imports() -> None:
    if not IMPORTS:
        return
    site = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    files = sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())} - {""})
    with open(os.path.join(IMPORTS, f"{os.getpid()}.json"), "w") as f:
        json.dump({"site": site, "files": [x for x in files if site and x.startswith(site + os.sep)],
                   "metadata": sorted(_METADATA)}, f)


def main() -> int:
    sys.meta_path.insert(0, _StandIns())
    if IMPORTS:
        _watch_metadata()
    cases = [json.loads(line) for line in sys.stdin if line.strip()]
    # One process per compute capability: sglang reads the capability at import time in places,
    # while the name, memory and count are read when the arguments are checked.
    groups: dict[str, list[dict]] = {}
    for case in cases:
        groups.setdefault(f"{case['gpu']['cc']} CUDA {case['gpu']['cuda']}", []).append(case)
    # Imported once here, so that each fork starts with them loaded: none of them asks the device
    # anything when it is imported.
    import torch
    import torchvision  # noqa: F401  (it compares its CUDA with torch.version.cuda, which the stubs change)
    import transformers  # noqa: F401

    _stand_in_fakes(torch)

    running: dict[int, str] = {}
    width = max(1, min(len(groups), os.cpu_count() or 1))
    failed = False
    for key, group in groups.items():
        while len(running) >= width:
            failed |= _reap(running)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _run_group(group)
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                _write_imports()
                os._exit(code)
        running[pid] = key
    while running:
        failed |= _reap(running)
    return 1 if failed else 0


def _reap(running: dict[int, str]) -> bool:
    pid, status = os.wait()
    key = running.pop(pid, "?")
    if status != 0:
        print(f"gpunode judge: the process for compute capability {key} ended with status {status}", file=sys.stderr)
    return status != 0


if __name__ == "__main__":
    sys.exit(main())
