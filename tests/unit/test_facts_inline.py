"""Sections marked inline run in the facts probe's own shell, without a subshell each: they must
leave that shell as they found it (options, positional parameters, IFS, folder, the probe's own
variables), or a later section would read a changed shell."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from gpunode.facts.probe import _PRELUDE, _snippets, script, split

INLINE = [s for s in _snippets() if s.inline]
_FORBIDDEN = re.compile(r"(?<![\w$-])(exit|cd|set|shift|trap|exec|return|eval|local|readonly|export|alias)(?![\w-])")
_ASSIGNED = re.compile(r"(?:^|[\s;{(|&])([A-Za-z_][A-Za-z0-9_]*)=")
_LOOP_OR_READ = re.compile(r"\b(?:for|read(?: -[a-z]+)*)\s+((?:[A-Za-z_][A-Za-z0-9_]*\s*)+)")
_PROBES_OWN = re.compile(r"^(N|GN_\w*|gn_\w*|rc_\w*|PATH|LC_ALL|IFS|HOME|PWD|OLDPWD)$")


def _code(body: str) -> str:
    """The body without quoted text and command substitutions (which run in a subshell anyway)."""
    body = re.sub(r"\$\((?:[^()]|\([^()]*\))*\)", "", body)
    return re.sub(r"'[^']*'", "''", body)


def test_there_are_inline_sections_and_each_says_so_in_the_script():
    assert {"host", "os_release", "pythons", "cpus", "meminfo", "memlimit", "shm", "disk", "container",
            "driver_proc"} <= {s.name for s in INLINE}
    text = script(INLINE)
    assert "\n( " not in text and text.count("} </dev/null 2>&1; rc_") == len(INLINE)


@pytest.mark.parametrize("snippet", INLINE, ids=lambda s: s.name)
def test_an_inline_body_changes_nothing_of_the_shell_it_runs_in(snippet):
    code = _code(snippet.body)
    assert not _FORBIDDEN.findall(code.replace("unset IFS", "")), "a builtin that changes the shell"
    names = set(_ASSIGNED.findall(code))
    for group in _LOOP_OR_READ.findall(code):
        names |= set(group.split())
    assert not [n for n in names if _PROBES_OWN.match(n) and n != "IFS"], "assigns the probe's own variables"
    # IFS only for one read (IFS=: read ...), or set and then unset (back to the default) in the body.
    bare = [m.start() for m in re.finditer(r"(?<![\w])IFS=[^ ;]*(?! read)[ ;]", code)
            if not re.match(r"IFS=\S* read\b", code[m.start():])]
    assert not bare or code.rfind("unset IFS") > max(bare), "IFS left changed"


STATE = r"""
printf 'state %s|%s|%s|%s|' "$-" "$#" "$*" "$(pwd)"
# An unset IFS splits as the default one does (POSIX), so the two read the same here.
if [ -n "${IFS+x}" ]; then v=$IFS; else v=" $(printf '\t')$gn_nl"; fi
printf 'ifs %s|' "$(printf %s "$v" | od -An -c)"
printf '%s|%s|%s|%s\n' "$N" "$GN_MODEL" "$GN_VENV_ROOT" "$gn_nl"
"""


@pytest.mark.parametrize("shell", ["sh", "dash", "bash", "busybox"])
def test_the_probes_shell_is_the_same_after_every_inline_section(shell):
    if not shutil.which(shell):
        pytest.skip(f"{shell} is not installed here")
    argv = [shell, "sh"] if shell == "busybox" else [shell]
    # The real probe text of the inline sections, between two dumps of the shell's state.
    body = script(INLINE)[len(_PRELUDE.lstrip("\n")):]
    text = _PRELUDE.lstrip("\n") + STATE + body + STATE
    out = subprocess.run([*argv, "-c", text, "sh", "N0NCE", "/m", "", "/opt/gpunode/venvs"], capture_output=True,
                         text=True, check=True).stdout
    before, after = [line for line in out.splitlines() if line.startswith("state ")]
    assert before == after
    assert set(split(out, "N0NCE")) == {s.name for s in INLINE}
