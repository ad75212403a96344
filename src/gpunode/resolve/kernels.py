"""Which GPUs a pin set's wheels have code for: compat/kernel_sms.yml, read from the released
wheels by gpunode.knowledge.kernelsms (never typed by hand)."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from gpunode import yamlsrc
from gpunode.resolve.kb import KB, Pinset

WHERE = "compat/kernel_sms.yml (generated from the wheels by gpunode.kernelsms)"


@functools.cache
def table() -> dict[str, Any]:
    return yamlsrc.table(resources.files("gpunode").joinpath("compat/kernel_sms.yml").read_text())


def core(package: str, version: str, machine: str) -> dict[str, list[str]] | None:
    """{'sass': [...], 'ptx': [...]} of the library every server loads; None when not recorded."""
    row = table().get(package, {}).get(version, {}).get(machine)
    return row["core"] if row else None


def runs(p: Pinset, machine: str, cc: str) -> bool | None:
    """Whether `p`'s GPU code loads on compute capability `cc` on `machine`; None when unknown."""
    if p.gpu_code is None:
        return None
    code = core(*p.gpu_code, machine)
    return None if code is None else runs_on(code["sass"], code["ptx"], cc)


def runs_on(sass: list[str], ptx: list[str], cc: str) -> bool:
    """Whether a GPU of compute capability `cc` ("8.6") can load code from these lists: SASS of the
    same major and a minor no higher than its own (arch-specific 'a' code only on its exact GPU),
    or any PTX of a lower or equal version."""
    major, minor = (int(x) for x in cc.split("."))
    mine = major * 10 + minor
    for name in sass:
        digits = name[3:].rstrip("af")
        sm = int(digits)
        if name.endswith("a"):
            if sm == mine:
                return True
        elif sm // 10 == major and sm % 10 <= minor:
            return True
    return any(int(name[8:].rstrip("af")) <= mine for name in ptx)


def describe(p: Pinset, machine: str) -> str:
    """'sglang-kernel 0.4.10 (x86_64): SASS sm_80, ...; no PTX'."""
    if p.gpu_code is None:
        return f"{p.id}: no GPU code"
    code = core(*p.gpu_code, machine)
    package, version = p.gpu_code
    if code is None:
        return f"{package} {version} ({machine}): not in {WHERE}"
    ptx = ", ".join(code["ptx"]) if code["ptx"] else "no PTX"
    return f"{package} {version} ({machine}): SASS {', '.join(code['sass'])}; {ptx}"


def sm(cc: str) -> str:
    return "sm_" + cc.replace(".", "")


def serving(kb: KB, cc: str) -> list[tuple[Pinset, str]]:
    """(pin set, machine) pairs whose wheels have code for `cc`, in the knowledge base's order."""
    return [(p, m) for p in kb.pinsets for m in p.machines if runs(p, m, cc)]


def none_serve(kb: KB, cc: str, name: str) -> tuple[str, str, str] | None:
    """(message, hint, evidence) when no pinned wheel has code for `cc`: gpunode cannot serve on it."""
    if serving(kb, cc):
        return None
    seen: dict[str, list[str]] = {}
    for p in kb.pinsets:
        for m in p.machines:
            if p.gpu_code and core(*p.gpu_code, m) is not None:
                code = core(*p.gpu_code, m) or {}
                seen.setdefault(f"{p.gpu_code[0]} {p.gpu_code[1]}", []).append(
                    f"{m}: {', '.join(code['sass'])}" + (f" + PTX {', '.join(code['ptx'])}" if code["ptx"] else ""))
    listing = "; ".join(f"{k} ({' | '.join(dict.fromkeys(v))})" for k, v in seen.items())
    message = (f"{name} has compute capability {cc} ({sm(cc)}): no released wheel of gpunode's pin sets has code "
               f"for it (no {sm(cc)} SASS, no PTX it could compile), so neither SGLang nor vLLM can start on it")
    hint = ("use GPUs of compute capability 8.0 or newer (A10/A10G, A100, L4, L40S, H100, ...); adding a row to "
            "gpus.yml would not help, since no pinned kernel has code for this GPU")
    return message, hint, f"GPU code of the pinned wheels ({WHERE}): {listing}"
