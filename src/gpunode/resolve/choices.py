"""The inventory variables the resolver reads, typed.

Their names and types are declared in resolve/types.yml, part of the one registry
(gpunode/variables.py, docs/variables.md); the defaults are the fields below.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from gpunode.secrets import refuse_in_args


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
    # the weights role's variables (its defaults.yml): where the model is staged is part of the plan
    model_source: str | None = None
    weights_stage: bool = True
    weights_dest_root: str = "/dev/shm"
    attention_backend: str | None = None
    mamba_strategy: str | None = None
    mtp: str = "auto"
    # run the Python code a model folder ships (config.json auto_map): off unless the inventory says so
    trust_remote_code: bool = False
    python: str | None = None
    venv_root: str = "/opt/gpunode/venvs"
    # the cuda_fixes role's default; the plan's env points every JIT cache here (toolkit.jit_env)
    cuda_jit_cache: str = "/var/cache/gpunode/jit"
    kv_cache_bytes: int = 268435456
    max_num_seqs: int = 64


def _ints(value: Any) -> tuple[int, ...]:
    if isinstance(value, str):
        return tuple(int(p) for p in value.split(","))
    return tuple(value) if isinstance(value, list) else (value,)


def from_vars(variables: dict[str, Any]) -> Choices:
    """Typed choices from a target's merged inventory variables. Names and types are the registry's
    (gpunode/variables.py, from resolve/types.yml): an unknown name or a value of the wrong type is
    refused there, with where it was set when the CLI checked it first."""
    from gpunode import variables as registry

    registry.check(variables, default_where="the inventory or --set")
    v = {k: x for k, x in variables.items() if x is not None and k in FIELDS}
    kw: dict[str, Any] = {}
    for key, value in v.items():
        if key in ("gpus", "slot_cores"):
            kw[key] = _ints(value)
        elif key == "mem_fraction":
            kw[key] = float(value)
        elif key == "mtp":
            kw[key] = str(value).lower() if isinstance(value, bool) else value
        elif key == "extra_args":
            # split here, not in the registry: its message names the error only, never the string (an API key)
            kw[key] = tuple(shlex.split(value)) if isinstance(value, str) else tuple(str(a) for a in value)
            refuse_in_args("extra_args", kw[key])  # argv is public: secrets go to the 0600 env file
        else:
            kw[key] = value
    return Choices(**kw)


FIELDS = frozenset(f.name for f in fields(Choices))
#: The one home of these variables' defaults (docs/variables.md is rendered from it).
DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(Choices)}


def value(variables: Mapping[str, Any], name: str) -> Any:
    """A resolver variable as the resolver reads it: the target's, else its default here. For the
    code outside the resolver that needs one (a role's check, teardown) without a plan."""
    given = variables.get(name)
    return DEFAULTS[name] if given is None else given
