"""The probe scripts engine/inline.py marks run in the batch's own shell as a function call:
each must read the same there as on its own (`sh -c`), and leave the batch's shell as it was."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from gpunode import shell
from gpunode.engine import inline, journal, probe
from gpunode.steps import apt, judge, reads, reuse, systemd, weights

SCRIPTS = sorted(inline.SAFE)
_ONE_LINE_FUNCTION = re.compile(r"gn_\w+\(\) \{[^\n]*\}")
_FORBIDDEN = re.compile(r"(?<![\w$-])(exit|return|cd|exec|trap|set -[a-z]|readonly|export|alias|local)(?![\w-])")
_ASSIGNED = re.compile(r"(?:^|[\s;{(|&])([A-Za-z_][A-Za-z0-9_]*)=(?!\S* (?:read|stat)\b)")
_LOOP = re.compile(r"\bfor\s+([A-Za-z_]\w*)")
_READ = re.compile(r"\bread(?: -[a-z]+)*((?:\s+[A-Za-z_]\w*)+)")
_CASE_LABEL = re.compile(r"(?m)^\s*[^\s()]+\)")


def _code(script: str) -> str:
    """The script without quoted text, command substitutions and subshells (those fork anyway),
    and without its own one-line helper functions (their return is theirs)."""
    script = re.sub(r"\$\((?:[^()]|\([^()]*\))*\)", "", script)
    script = re.sub(r"\(exit [^)]*\)", "", script)
    script = re.sub(r"'[^']*'", "''", script)
    script = re.sub(r'"(?:[^"\\]|\\.)*"', '""', script)
    return _CASE_LABEL.sub("", _ONE_LINE_FUNCTION.sub("", script))


def test_the_passes_the_reused_answers_and_the_pending_handlers_are_marked():
    assert {reads._STAT, reads._HASH, reads._READ, reuse.PACKAGES, reuse.UNITS, journal._PENDING} <= inline.SAFE
    text = probe.build([["sh", "-c", reads._STAT, "sh", "/etc"], ["sh", "-c", "exit 3", "sh"]], "N")
    assert "gn_probe /etc </dev/null 2>&1" in text and "( set -- \nexit 3\n) </dev/null 2>&1" in text


def test_the_reusing_shells_ask_what_the_steps_own_probes_ask():
    """They are files of their own (steps/reuse_*.sh): their dpkg-query and systemctl show are the steps'."""
    assert f"dpkg-query -W -f='{apt.FORMAT}' -- \"$@\"" in reuse.PACKAGES
    assert "systemctl show " + " ".join(f"-p{p}" for p in systemd.PROPERTIES) + " -- $gn_miss 2>&1" in reuse.UNITS
    assert f'[ "$gn_n" = {len(systemd.PROPERTIES)} ]' in reuse.UNITS  # every property as a running unit has it
    assert "# shellcheck" not in reuse.PACKAGES + reuse.UNITS  # the linter's lines stay at home


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: s.split("\n", 1)[0][:40])
def test_a_marked_script_changes_nothing_of_the_batchs_shell(script):
    code = _code(script)
    assert not _FORBIDDEN.findall(code), "ends or changes the shell it runs in"
    evals = re.findall(r"\beval \"\\?(\S+)", script)
    assert not [e for e in evals if not e.startswith(("gn_", "$gn_"))], "eval of other names"
    names = set(_ASSIGNED.findall(code)) | set(_LOOP.findall(code))
    for group in _READ.findall(code):
        names |= set(group.split())
    assert not [n for n in names if not n.startswith("gn_")], "assigns a name of the batch's own"


STATE = r"""printf 'state %s|%s|%s|%s|' "$-" "$#" "$*" "$(pwd)"
if [ -n "${IFS+x}" ]; then printf 'ifs %s|' "$(printf %s "$IFS" | od -An -c)"; else printf 'ifs unset|'; fi
# Each variable's first line (a value's later lines are not names); the probes' own gn_* left out.
(set -o posix 2>/dev/null; set) | grep -E '^[A-Za-z_][A-Za-z0-9_]*=' |
  grep -v -e '^gn_' -e '^_=' -e '^LINENO=' -e '^PPID=' -e '^BASH_' -e '^FUNCNAME=' -e '^PIPESTATUS=' | tr '\n' ' '
echo
"""


def _cases(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "handlers.pending").write_text("demo\trestart:x.service\ntorn")
    (tmp_path / "a.conf").write_text("port=1\n")
    (tmp_path / "m.json").write_text('{"a": 1}\n')
    (tmp_path / "judged").write_text("d1\naccepted\n")
    files = [str(tmp_path / "a.conf"), str(tmp_path / "missing"), str(tmp_path)]
    return [
        ["sh", "-c", reads._STAT, "sh", *files],
        ["sh", "-c", reads._HASH, "sh", *files],
        ["sh", "-c", reads._READ, "sh", str(tmp_path / "m.json"), str(tmp_path / "missing")],
        reuse.packages(["dpkg", "no-such-package-gpunode"]),
        reuse.units(["no-such-unit-gpunode.service"]),
        journal.pending_probe(str(state)),
        ["sh", "-c", weights.READS[1].without, "sh", str(tmp_path), str(tmp_path / "missing")],
        ["sh", "-c", weights.READS[0].without, "sh", str(tmp_path / "missing"), str(tmp_path / "a/b")],
        ["sh", "-c", judge._PROBE, "sh", str(tmp_path / "missing/python"), str(tmp_path / "m.json"), "60", "", "",
         str(tmp_path), "cpu0", str(tmp_path / "judged"), "d1", "{}", "cpu1", str(tmp_path / "missing"), "d2", "{}"],
    ], state


def _free(text: str) -> str:
    """The free bytes df prints move whenever anything else on the machine writes: compare the rest."""
    return re.sub(r"^(\d+) (\d+)$", r"<free> \2", text, flags=re.M)


@pytest.mark.parametrize("sh", ["sh", "dash", "bash"])
def test_inline_reads_as_on_its_own_and_leaves_the_shell_as_it_was(tmp_path, sh):
    if not shutil.which(sh):
        pytest.skip(f"{sh} is not installed here")
    cases, state = _cases(tmp_path)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "GN_STATE": str(state)}
    for argv in cases:
        assert argv[2] in inline.SAFE
        alone = subprocess.run([sh, *argv[1:]], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
        text = probe.LOCALE + STATE + probe.build([argv], "N0NCE") + STATE
        out = subprocess.run([sh, "-c", text, "sh", "one", "two words"], capture_output=True, text=True, env=env,
                             check=True).stdout
        [got] = probe.parse(out, 1, "N0NCE")
        assert (got.exit_code, _free(got.output)) == (alone.returncode, _free(alone.stdout + alone.stderr)), \
            shell.join(argv[4:])
        before, after = [line for line in out.splitlines() if line.startswith("state ")]
        assert before == after
