"""The inventory variables the resolver reads, checked and typed.

Only these keys are read (see docs/resolve.md, "Inventory variables"); other
variables belong to other roles and are ignored here. A value of the wrong
type is an InventoryError naming the variable.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from gpunode.errors import InventoryError, preview
from gpunode.secrets import refuse_in_args

ENGINES = ("sglang", "vllm", "vllm-cpu")
MTP = ("auto", "true", "false")


@dataclass(frozen=True)
class Choices:
    engine: str | None = None
    pinset: str | None = None
    engine_version: str | None = None
    mem_fraction: float | None = None
    context_length: int | None = None
    extra_args: tuple[str, ...] = ()
    base_port: int = 30001
    router_port: int = 30000
    router_host: str = "127.0.0.1"
    router_policy: str | None = None
    host: str = "127.0.0.1"
    slots: int | None = None
    slot_cores: tuple[int, ...] | None = None
    tp: int | None = None
    gpus: tuple[int, ...] | None = None
    served_model_name: str | None = None
    model_name: str | None = None
    model_path: str | None = None
    attention_backend: str | None = None
    mamba_strategy: str | None = None
    mtp: str = "auto"
    python: str | None = None
    venv_root: str = "/opt/gpunode/venvs"
    # the cuda_fixes role's default; the servers' FLASHINFER_WORKSPACE_BASE points here
    cuda_jit_cache: str = "/var/cache/gpunode/jit"
    kv_cache_bytes: int = 268435456
    max_num_seqs: int = 64


def _int(name: str, value: Any, low: int = 0, high: int = 1 << 62) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InventoryError(f"variable {name}={preview(value)} must be a whole number from {low} to {high}",
                             hint=f"fix {name} in the inventory or in --set")
    return value


def _ints(name: str, value: Any) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, str):
        parts = [v.strip() for v in value.split(",")] if value.strip() else []
        if not all(p.isascii() and p.isdigit() and len(p) <= 9 for p in parts):
            raise InventoryError(f"variable {name}={preview(value)} must be whole numbers separated by commas, "
                                 "e.g. 0,1", hint=f"fix {name} in the inventory or in --set")
        value = [int(p) for p in parts]
    if not isinstance(value, (list, tuple)) or not value:
        raise InventoryError(f"variable {name}={value!r} must be a list of numbers, e.g. [0, 1]",
                             hint=f"fix {name} in the inventory")
    return tuple(_int(name, v) for v in value)


def _str(name: str, value: Any, allowed: tuple[str, ...] | None = None) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if allowed and text not in allowed:
        raise InventoryError(f"variable {name}={value!r} must be one of {', '.join(allowed)}",
                             hint=f"fix {name} in the inventory or in --set")
    return text


def from_vars(variables: dict[str, Any]) -> Choices:
    """Typed choices from a target's merged inventory variables."""
    v = {k: x for k, x in variables.items() if x is not None}
    kw: dict[str, Any] = {}
    if "engine" in v:
        kw["engine"] = _str("engine", v["engine"], ENGINES)
    for key in ("pinset", "engine_version", "router_host", "router_policy", "host", "served_model_name",
                "model_name", "model_path", "attention_backend", "mamba_strategy", "venv_root",
                "cuda_jit_cache"):
        if key in v:
            kw[key] = _str(key, v[key])
    if "python" in v:
        if isinstance(v["python"], float):
            # YAML reads `python: 3.10` as the number 3.1: refuse rather than guess.
            raise InventoryError(f"variable python={v['python']!r} is a number; YAML turned the version into one",
                                 hint="quote it in the inventory: python: \"3.10\"")
        kw["python"] = _str("python", v["python"])
        if not re.fullmatch(r"3\.\d{1,2}", kw["python"]):
            raise InventoryError(f"variable python={preview(v['python'])} is not a Python version",
                                 hint="give major.minor, e.g. 3.12 (quoted in YAML: python: \"3.12\")")
    if "mem_fraction" in v:
        f = v["mem_fraction"]
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < float(f) < 1:
            raise InventoryError(f"variable mem_fraction={f!r} must be a number between 0 and 1, e.g. 0.85",
                                 hint="fix mem_fraction in the inventory or in --set")
        kw["mem_fraction"] = float(f)
    for key, low, high in (("context_length", 1, 1 << 24), ("base_port", 1, 65535), ("router_port", 1, 65535),
                           ("slots", 1, 1024), ("tp", 1, 64), ("kv_cache_bytes", 1 << 20, 1 << 50),
                           ("max_num_seqs", 1, 1 << 16)):
        if key in v:
            kw[key] = _int(key, v[key], low, high)
    for key in ("gpus", "slot_cores"):
        if key in v:
            kw[key] = _ints(key, v[key])
    if "mtp" in v:
        kw["mtp"] = _str("mtp", v["mtp"], MTP)
    if "extra_args" in v:
        extra = v["extra_args"]
        if isinstance(extra, str):
            try:
                kw["extra_args"] = tuple(shlex.split(extra))
            except ValueError as exc:  # the message only, never the string: it may hold an API key
                raise InventoryError(f"variable extra_args cannot be split into arguments: {exc}",
                                     hint="close the quote, or give a list: extra_args: [\"--flag\", \"value\"]"
                                     ) from None
        elif isinstance(extra, (list, tuple)):
            kw["extra_args"] = tuple(str(a) for a in extra)
        else:
            raise InventoryError(f"variable extra_args={extra!r} must be a list or a string",
                                 hint='e.g. extra_args: ["--watchdog-timeout", "1200"]')
        refuse_in_args("extra_args", kw["extra_args"])  # argv is public: secrets go to the 0600 env file
    return Choices(**kw)
