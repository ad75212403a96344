"""Whether the servers run the Python code a model folder ships (config.json `auto_map`).

Off unless the inventory sets trust_remote_code: the code runs with the server's rights. Where the
pinned sglang cannot even read the model's config without it (compat/derived/sglang-choices.yml,
from the wheel), pick.py refuses that pin set, naming the model and the variable; elsewhere a
model with custom code is planned without it and the plan warns.
"""

from __future__ import annotations

from gpunode.resolve.kb import KB, Pinset
from gpunode.resolve.models import ModelRule
from gpunode.resolve.trail import Trail

# The message transformers raises (via sglang's get_config) when a config needs its repository's code
NEEDS_IT = "trust_remote_code"
SOURCE = ("https://huggingface.co/docs/transformers/custom_models (trust_remote_code); transformers "
          "AutoConfig.from_pretrained(trust_remote_code=...) as sglang's hf_transformers_utils.get_config "
          "calls it; compat/derived/sglang-choices.yml (inv kb.refresh: what the pinned sglang refuses)")


def needs_it(said: str) -> bool:
    """A derived refusal that trust_remote_code lifts: the config names code the loader must run."""
    return NEEDS_IT in said and "custom code" in said


def shipped(rule: ModelRule) -> str:
    m = rule.model
    return f"config.json auto_map: {', '.join(m.custom_code)}" if m and m.custom_code else "its repository's code"


def decide(kb: KB, p: Pinset, rule: ModelRule, trusted: bool, cc: str | None, trail: Trail) -> bool:
    """Whether the servers get the engine's trust_remote_code flag (flags.py spells it), with the reason."""
    m = rule.model
    custom = bool(m and m.custom_code)
    fact = f"model.custom_code={list(m.custom_code) if m else []}"
    if trusted:
        why = (f"set by the inventory (trust_remote_code): {p.engine} runs the Python code in the model folder "
               f"({shipped(rule)})" if custom else
               "set by the inventory (trust_remote_code); config.json names no custom code (no auto_map), so this "
               "model does not need it")
        trail.decide("remote code", "trusted (--trust-remote-code)", why, fact=fact, rule="trust_remote_code",
                     source=SOURCE)
        return True
    if custom:
        arch = m.architectures[0] if m and m.architectures else "?"
        derived = kb.sglang_pick(p.id, arch, cc, m.model_type if m else "",
                                   m.quantization_form if m else "") if cc and p.engine == "sglang" else None
        said = (f"sglang {p.version} reads {arch}'s reference config without it (derived from the wheel)" if derived
                else f"whether {p.engine} {p.version} needs it for {arch} is not derived")
        trail.warn(f"{rule.label} ships Python code ({shipped(rule)}), which the servers do not run: {said}, but "
                   f"its own model type or tokenizer may still need it; if {p.engine} stops asking for "
                   "trust_remote_code, set trust_remote_code: true (only for a model source you trust)")
        trail.decide("remote code", "not run (no flag)", f"trust_remote_code is off; {arch} is read by "
                     f"{p.engine}'s own code", fact=fact, rule="trust_remote_code (default off)", source=SOURCE)
    return False
