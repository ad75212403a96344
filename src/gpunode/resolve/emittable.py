"""Every launch flag and value the resolver can emit for a pin set, read from the knowledge base.

tests/test_wheel_flags.py checks each of them against the pin set's released
sglang wheel, so this list must cover what flags.py can put on a command line:
every flags.yml row of the version (with its values), the attention backends
and vision backends of every gpus.yml architecture, its tensor-parallel
arguments, and the parsers, MTP, mamba and extra arguments of every models.yml
family the version can run. It walks the tables, not a list of known rows, so
a new row is checked without a change here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gpunode.resolve import versions
from gpunode.resolve.kb import KB, Family, Pinset

ANY = "*"   # a value the KB does not fix (a path, a number): only the flag's existence is checked


@dataclass(frozen=True)
class Use:
    flag: str
    value: str | None   # None: the flag is emitted alone; ANY: with a value the KB does not fix
    where: str          # the KB row that emits it


@dataclass(frozen=True)
class Emittable:
    uses: tuple[Use, ...]
    removed: dict[str, str]   # flags the KB says no longer exist in this version -> the row saying so

    def flags(self) -> set[str]:
        return {u.flag for u in self.uses}

    def values(self, flag: str) -> set[str | None]:
        return {u.value for u in self.uses if u.flag == flag}


def _at(where: str) -> str:
    """"/…/compat/gpus.yml:16" -> "gpus.yml:16": messages name the file, not the checkout."""
    return os.path.basename(where)


def pairs(args: tuple[str, ...] | list[str], where: str) -> list[Use]:
    """--flag value pairs of an argument list; a flag followed by a flag (or nothing) stands alone."""
    out = []
    for i, a in enumerate(args):
        if a.startswith("--"):
            nxt = args[i + 1] if i + 1 < len(args) else None
            out.append(Use(a, None if nxt is None or nxt.startswith("--") else nxt, where))
    return out


def emittable(kb: KB, p: Pinset) -> Emittable:
    e, v = p.engine, p.version
    uses: list[Use] = []
    removed: dict[str, str] = {}
    flag_of: dict[str, str] = {}
    for name, o in kb.options.items():
        for r in o.rows.get(e, ()):
            if not versions.matches(v, r.engine):
                continue
            where = f"{_at(o.where)} options.{name}"
            flag_of[name] = r.flag
            uses += [Use(r.flag, x, where) for x in r.values] or [Use(r.flag, ANY, where)]
            uses += [Use(d, ANY, f"{where} deprecated") for d in r.deprecated]
            uses += [u for value, args in r.requires.items() for u in pairs(args, f"{where} requires[{value}]")]
            removed.update({x: f"{where} removed" for x in r.removed})
    if e == "sglang":
        uses += _archs(kb, v, flag_of)
    for fam in kb.families:
        if _runs(fam, e, v):
            uses += _family(fam, e, flag_of)
    return Emittable(tuple(dict.fromkeys(uses)), removed)


def _archs(kb: KB, version: str, flag_of: dict[str, str]) -> list[Use]:
    out: list[Use] = []
    att, mm = flag_of.get("attention_backend"), flag_of.get("mm_attention_backend")
    for a in kb.archs:
        where = f"{_at(a.where)} archs[{a.cc}]"
        # a backend outside `allowed` is refused (attention.judge), so warned ones are among these
        backends = [a.attention_default, *a.attention_allowed]
        for h in a.hybrid_gdn:
            if versions.matches(version, h.engine or None):
                backends += [*h.allowed, *([h.default] if h.default else [])]
        if att:
            out += [Use(att, b, f"{where}.attention") for b in dict.fromkeys(backends)]
        if mm and a.mm_attention:
            out.append(Use(mm, a.mm_attention, f"{where}.mm_attention"))
        out += pairs(a.tp_args.get("sglang", ()), f"{where}.tp.args")
    return out


def _runs(fam: Family, engine: str, version: str) -> bool:
    low = fam.min_engine.get(engine)
    return low is None or versions.parse(version) >= versions.parse(low)


def _family(fam: Family, engine: str, flag_of: dict[str, str]) -> list[Use]:
    where = f"{_at(fam.where)} families[{fam.id}]"
    out: list[Use] = []
    parsers = fam.parsers.get(engine)
    if parsers:
        for option, value in (("reasoning_parser", parsers.reasoning), ("tool_call_parser", parsers.tool_call)):
            if value and option in flag_of:
                out.append(Use(flag_of[option], value, f"{where}.parsers"))
        out += pairs(parsers.args, f"{where}.parsers.args")
    # a family's own attention rows (MLA, attention sinks) replace the architecture's backends where they apply
    att = flag_of.get("attention_backend")
    # (getattr: the field comes with the resolver's family rows; before them no family has it)
    for row in getattr(fam, "attention", ()):
        if engine == "sglang" and att is not None:
            backends = dict.fromkeys([row.default, *row.allowed])
            out += [Use(att, b, f"{where}.attention[{','.join(row.cc)}]") for b in backends if b]
    for pref in fam.attention_prefer:
        if engine == "sglang" and att is not None:
            out.append(Use(att, pref.backend, f"{where}.attention_prefer[{','.join(pref.cc)}]"))
    mtp = fam.mtp.get(engine)
    if mtp:
        out += pairs(mtp.args, f"{where}.mtp")
    mamba = flag_of.get("mamba_strategy")
    if fam.hybrid_gdn and mamba:
        for value, key in ((fam.mamba_strategy, "mamba_strategy"), (mtp.mamba_strategy if mtp else None, "mtp")):
            if value:
                out.append(Use(mamba, value, f"{where}.{key}"))
    for x in fam.extra_args:
        wanted = x.when.get("engine", [engine])
        if engine in (wanted if isinstance(wanted, list) else [wanted]):
            out += pairs(x.args, f"{where}.extra_args")
    return out
