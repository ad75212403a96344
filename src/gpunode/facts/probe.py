"""The one batched probe: a POSIX sh script that prints every fact section of a
target in one round trip, and the splitter that cuts its output back apart.

The script needs nothing on the target beyond sh and coreutils (no python): JSON
files are cat'ed back raw and parsed here. Every section is framed by marker
lines that carry a per-run nonce, so no file content can fake a section break:

    @@gpunode:<nonce>:section <name>
    <raw output, stdout and stderr>
    @@gpunode:<nonce>:rc <exit code>

The output of one section is exactly the bytes between the section line and
the newline the script adds before the rc line.
"""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Sequence

from gpunode import marked, shell
from gpunode.errors import FactError, tail
from gpunode.facts import cache
from gpunode.facts.snapshot import RawFacts, Section
from gpunode.facts.snippet import Snippet
from gpunode.transport.base import Transport

DEFAULT_VENV_ROOT = "/opt/gpunode/venvs"

_PRELUDE = r"""
N=$1; GN_MODEL=$2; GN_VENV=$3; GN_VENV_ROOT=$4; GN_CACHE=${5:-}; GN_WRITE=${6:-}
export LC_ALL=C
gn_nl='
'
# Each folder once: the probe walks PATH for python3.8 ... python3.15, nvidia-smi and nvcc.
for gn_d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
  case :$PATH: in *:"$gn_d":*) ;; *) PATH=${PATH:+$PATH:}$gn_d;; esac
done
sec() { printf '@@gpunode:%s:section %s\n' "$N" "$1"; }
end() { printf '\n@@gpunode:%s:rc %s\n' "$N" "$1"; }
# A wedged GPU can hang nvidia-smi for minutes; bound every driver call.
t() { if command -v timeout >/dev/null 2>&1; then timeout 30 "$@"; else "$@"; fi; }
"""


def _snippets() -> list[Snippet]:
    # Imported here so that each area keeps its own probe text next to its parser.
    from gpunode.facts import cuda, gpu, install, model, system

    return [*system.SNIPPETS, *gpu.SNIPPETS, *cuda.SNIPPETS, *install.SNIPPETS, *model.SNIPPETS]


def script(snippets: Sequence[Snippet] | None = None) -> str:
    """The whole probe as one sh script; arguments: nonce, model, venv, venv root, and optionally
    the state folder that holds the facts cache and "write" when the probe may update it."""
    return _default_script() if snippets is None else _script(snippets)


@functools.cache
def _default_script() -> str:
    # The same text on every run: built once per process (~0.3 ms of every no-op's own CPU).
    return _script(_snippets())


def _script(snippets: Sequence[Snippet]) -> str:
    chosen = list(snippets)
    parts = [_PRELUDE.lstrip("\n")]
    parts += [f"{text.strip()}\n" for text in dict.fromkeys(s.prepare for s in chosen if s.prepare)]
    groups = list(dict.fromkeys(s.cached for s in chosen if s.cached is not None))
    bodies: dict[str, str] = {g.name: "" for g in groups}
    blocks: list[tuple[Snippet, str]] = []
    for s in chosen:
        if not _section_name(s.name):
            raise ValueError(f"section name {s.name!r} must be [a-z0-9_]+ (it becomes a file name)")
        # rc_<name> lets a later section depend on an earlier one (the -q fallback).
        opened, closed = ("{", "}") if s.inline else ("(", ")")
        block = (f"sec {s.name}\n{opened} {s.body.strip()}\n{closed} </dev/null 2>&1; rc_{s.name}=$?; "
                 f"end $rc_{s.name}\n")
        block = f"if {s.when}; then\n{block}fi\n" if s.when else block
        if s.cached is not None:
            bodies[s.cached.name] += block
        blocks.append((s, block))
    if not groups:
        return "".join(parts + [b for _, b in blocks])
    signature, wrapped = cache.shell(groups, bodies)
    parts.append(signature)
    for s, block in blocks:
        if s.cached is None:
            parts.append(block)
        elif s.cached.name in wrapped:
            parts.append(wrapped.pop(s.cached.name))
    parts.append(cache.EMIT)
    return "".join(parts)


def split(stdout: str, nonce: str) -> dict[str, Section]:
    """Cut the probe's stdout back into sections (pure)."""
    marker = f"@@gpunode:{nonce}:"
    stored, rest = cache.stored(stdout, nonce)
    found = marked.blocks(rest, f"{marker}section ", lambda _: f"{marker}rc ", key_ok=_section_name,
                          code_ok=marked.signed, newline=False)
    return {**stored, **{b.key: Section(b.body, int(b.code)) for b in found}}


def _section_name(text: str) -> bool:
    """What [a-z0-9_]+ matches as a whole."""
    return bool(text) and all(c in _NAME_CHARS for c in text)


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def venv_root(venv: str | None) -> str:
    """Where venvs go: the venv's parent folder, or gpunode's default."""
    if venv:
        parent = venv.rstrip("/").rsplit("/", 1)[0]
        return parent or "/"
    return DEFAULT_VENV_ROOT


def gather(transport: Transport, model_path: str | None = None, venv: str | None = None,
           timeout: float = 180.0, extra: Sequence[Snippet] = ()) -> RawFacts:
    """Run the probe on a target in one round trip and keep its raw sections.

    extra: more sections in the same round trip (inv doctor's units, journal and ports)."""
    nonce = secrets.token_hex(8)
    started = time.monotonic()
    text = script([*_snippets(), *extra]) if extra else script()
    result = transport.script(text, nonce, model_path or "", venv or "", venv_root(venv),
                              timeout=timeout)
    return collect(transport.name, result.stdout, nonce, model_path, venv, time.monotonic() - started,
                   exit_code=result.exit_code, stderr=result.stderr)


def inline(nonce: str, model_path: str | None = None, venv: str | None = None, state_ref: str = "",
           subshell: bool = True) -> str:
    """The probe as one subshell with its arguments set: shell text that another script (the
    engine's lock shell) runs, so that facts cost no round trip of their own.

    state_ref: shell text naming the state folder (the lock shell's "$d"): the facts cache is
    read from there, and updated when the lock shell holds the lock exclusively ($GN_EXCLUSIVE).
    subshell=False: the same without the parentheses, for a caller that runs it in a subshell of
    its own making (a command substitution: one fork, not two)."""
    args = shell.join([nonce, model_path or "", venv or "", venv_root(venv)])
    if state_ref:
        args += f' {state_ref} "${{GN_EXCLUSIVE:+write}}"'
    if not subshell:
        return f"exec </dev/null 2>&1\nset -- {args}\n{script()}"
    return f"( set -- {args}\n{script()}) </dev/null 2>&1\n"


def collect(target: str, stdout: str, nonce: str, model_path: str | None, venv: str | None,
            seconds: float | None, *, exit_code: int | None = None, stderr: str = "") -> RawFacts:
    """The raw sections of the probe's output (which may hold other output around them)."""
    sections = split(stdout, nonce)
    if not sections:
        raise FactError(
            "the facts probe printed no sections" + (f" (exit code {exit_code})" if exit_code is not None else ""),
            target=target,
            evidence=tail(stderr or stdout),
            hint="check that /bin/sh works on the target; run the probe by hand with "
            "`python -m gpunode.facts.probe > probe.sh` and `sh probe.sh x`",
        )
    return RawFacts(
        target=target,
        sections=sections,
        model_path=model_path,
        venv=venv,
        gathered_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        duration_s=round(seconds, 3) if seconds is not None else None,
    )


if __name__ == "__main__":
    # Print the script, so that it can be run by hand where gpunode cannot reach.
    print(script(), end="")
