"""What each pin set's sglang serves, as `inv kb.refresh` read it from the wheels
(compat/derived/sglang-registry.yml, written by gpunode/knowledge/wheelregistry.py).

    serves(kb, p, architectures)    # True / False, None where the pin set's sglang was not read
    releases_with(kb, arch)         # (pinned versions, newer versions on PyPI) whose registry has it
    configures(kb, p, model_type)   # whether its sglang or its lock's transformers knows the model type
    floor(kb, p, model)             # (method, minimum compute capability x10) of the model's quantization
"""

from __future__ import annotations

from typing import Any

from gpunode.resolve import versions
from gpunode.resolve.kb import KB, Pinset

WHERE = "compat/derived/sglang-registry.yml"
SOURCE = f"{WHERE} (inv kb.refresh: read from the released sglang and transformers wheels)"


def _sglang(kb: KB, version: str) -> dict[str, Any] | None:
    return (kb.registry.get("sglang") or {}).get(version)


def serves(kb: KB, p: Pinset, architectures: tuple[str, ...] | list[str]) -> bool | None:
    """Whether the pin set's sglang registers one of the config's architectures natively (as sglang's
    get_model_architecture asks); None when its wheel has not been read."""
    if p.engine != "sglang":
        return None
    data = _sglang(kb, p.version)
    if data is None:
        return None
    return any(a in data.get("architectures", ()) for a in architectures)


def releases_with(kb: KB, architecture: str) -> tuple[list[str], list[str]]:
    """(the pinned sglang versions whose registry has it, the newer ones on PyPI that have it), oldest first."""
    pinned = {str(x.get("sglang")) for x in (kb.registry.get("pinsets") or {}).values()}
    newer = {str(v) for v in kb.registry.get("newer") or ()}
    read = (kb.registry.get("sglang") or {}).items()
    have = [v for v, d in read if architecture in (d or {}).get("architectures", ())]
    return (sorted((v for v in have if v in pinned), key=versions.parse),
            sorted((v for v in have if v in newer), key=versions.parse))


def releases_configuring(kb: KB, model_type: str) -> tuple[list[str], list[str]]:
    """(the pinned sglang versions whose venv knows `model_type`: sglang's own config classes or the transformers
    its pin set locks; the newer releases on PyPI whose sglang brings a config class for it), oldest first."""
    pinsets = (kb.registry.get("pinsets") or {}).values()
    types = kb.registry.get("transformers") or {}
    read = kb.registry.get("sglang") or {}
    newer = {str(v) for v in kb.registry.get("newer") or ()}
    pinned = {str(x.get("sglang")) for x in pinsets
              if model_type in (read.get(str(x.get("sglang"))) or {}).get("config_types", ())
              or model_type in (types.get(str(x.get("transformers"))) or {}).get("model_types", ())}
    later = {v for v in newer if model_type in (read.get(v) or {}).get("config_types", ())}
    return sorted(pinned, key=versions.parse), sorted(later, key=versions.parse)


def newest_read(kb: KB) -> str | None:
    read = list(kb.registry.get("sglang") or {})
    return max(read, key=versions.parse) if read else None


def transformers_of(kb: KB, p: Pinset) -> str | None:
    return ((kb.registry.get("pinsets") or {}).get(p.id) or {}).get("transformers")


def configures(kb: KB, p: Pinset, model_type: str) -> bool | None:
    """Whether AutoConfig in the pin set's venv knows `model_type`: transformers' own mapping, or a config
    class sglang registers; None when either was not read."""
    data = _sglang(kb, p.version)
    tf = transformers_of(kb, p)
    types = (kb.registry.get("transformers") or {}).get(tf or "")
    if p.engine != "sglang" or data is None or types is None:
        return None
    return model_type in data.get("config_types", ()) or model_type in types.get("model_types", ())


def method(model: Any) -> str | None:
    """sglang's quantization method for the model's quantization, where gpunode can tell it: a ModelOpt
    checkpoint (quant_algo) NVFP4 is modelopt_fp4 and FP8 modelopt_fp8; otherwise the quant_method as
    named. NVFP4 of another producer (compressed-tensors) and plain fp8 have no single floor here."""
    q = str(model.quantization or "").lower()
    if not q:
        return None
    modelopt = "quant_algo" in (model.quantization_source or "")
    if q == "nvfp4":
        return "modelopt_fp4" if modelopt else None
    if q == "fp8":
        return "modelopt_fp8" if modelopt else None
    return q


def floor(kb: KB, p: Pinset, model: Any) -> tuple[str, int] | None:
    """(sglang's method, its minimum compute capability x10 on CUDA) read from the pin set's wheel; None
    where the method or its floor is not known by code (then gpus.yml's rows decide)."""
    m = method(model) if model is not None else None
    data = _sglang(kb, p.version) if p.engine == "sglang" else None
    if m is None or data is None:
        return None
    value = (data.get("quantization_floors") or {}).get(m)
    return (m, int(value)) if isinstance(value, int) else None


def cc_x10(cc: str) -> int:
    major, _, minor = cc.partition(".")
    return int(major) * 10 + int(minor or 0)
