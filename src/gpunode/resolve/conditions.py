"""The small condition language of fixes.yml and models.yml (`when:` blocks).

A condition is a mapping of keys to wanted values; it holds when every key
holds. A fact that is unknown (None) never satisfies a key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# key -> how it compares: "bool" (equal), "one" (the fact is one of the listed
# values), "any" (the fact is a list; one of its items is listed)
KEYS: dict[str, str] = {
    "engine": "one",
    "gpu": "bool",
    "cc": "one",
    "cc_major": "one",
    "architectures": "any",
    "quantization": "one",
    "in_container": "bool",
    "jit_toolkit": "one",
    "torch_cuda_major": "one",
    "cccl_behind": "bool",
    "kernel_links_libnuma": "bool",
    "libnuma": "bool",
    "other_kernel_installed": "bool",
    "flashinfer_changes": "bool",
    "ptxas_fix": "bool",
    "driver_lib_mismatch": "bool",
    "tp": "bool",
    "mtp": "bool",
}


def problem(key: str, want: Any) -> str | None:
    """Why a `when` entry is malformed, or None."""
    kind = KEYS.get(key)
    if kind is None:
        return f"unknown condition key; known: {', '.join(sorted(KEYS))}"
    if kind == "bool" and not isinstance(want, bool):
        return f"expected true or false, got {want!r}"
    if kind in ("one", "any") and not isinstance(want, list):
        return f"expected a list, got {want!r}"
    return None


def holds(when: Mapping[str, Any], ctx: Mapping[str, Any]) -> bool:
    for key, want in when.items():
        have = ctx.get(key)
        if have is None:
            return False
        kind = KEYS[key]
        if kind == "bool":
            if bool(have) != want:
                return False
        elif kind == "one":
            if str(have) not in {str(w) for w in want}:
                return False
        elif not {str(h) for h in have} & {str(w) for w in want}:
            return False
    return True


def describe(when: Mapping[str, Any], ctx: Mapping[str, Any]) -> str:
    """The facts a condition looked at, as `key=value` pairs (for a decision's `fact`)."""
    parts = []
    for key in when:
        have = ctx.get(key)
        if isinstance(have, (list, tuple)):
            have = ",".join(str(h) for h in have)
        parts.append(f"{key}={have}")
    return "; ".join(parts)
