"""The batched probe: one command, every step's output byte for byte, with its exit code."""

from __future__ import annotations

import pytest

from gpunode.engine import probe
from gpunode.errors import FactError
from gpunode.transport import LocalTransport


def test_each_probe_gets_its_own_output_and_exit_code_exactly():
    probes = [
        ["printf", "no newline at the end"],
        ["sh", "-c", "echo out; echo err >&2; exit 3"],
        ["printf", "two\n\n"],
        ["true"],
        ["cat", "/nonexistent/gpunode-probe-test"],
    ]
    results = probe.run_batch(LocalTransport(), probes)
    assert [r.output for r in results[:4]] == ["no newline at the end", "out\nerr\n", "two\n\n", ""]
    assert [r.exit_code for r in results] == [0, 3, 0, 0, 1]
    assert "No such file or directory" in results[4].output


def test_output_that_imitates_a_marker_does_not_split_a_section():
    fake = "gpunode-0000000000000000 end 0 0\n"
    results = probe.run_batch(LocalTransport(), [["printf", "%s", fake], ["echo", "second"]])
    assert results[0].output == fake
    assert results[1].output == "second\n"


def test_probes_cannot_read_the_script_from_stdin():
    # The script travels on stdin; a probe that reads stdin must see /dev/null, not the rest of it.
    results = probe.run_batch(LocalTransport(), [["cat"], ["echo", "after"]])
    assert results[0].output == ""
    assert results[1].output == "after\n"


def test_all_probes_cost_one_command():
    calls = []

    class Counting(LocalTransport):
        def _exec(self, argv, stdin, sink, timeout):
            calls.append(argv)
            return super()._exec(argv, stdin, sink, timeout)

    probe.run_batch(Counting(), [["echo", str(i)] for i in range(200)])
    assert len(calls) == 1


def test_a_batch_cut_short_names_the_missing_probe():
    nonce = "gpunode-abc"
    text = probe.build([["echo", "a"], ["echo", "b"]], nonce)
    cut = "gpunode-abc begin 0\na\n\ngpunode-abc end 0 0\ngpunode-abc begin 1\n"
    with pytest.raises(FactError, match="no result for probe 1 of 2"):
        probe.parse(cut, 2, nonce)
    assert "echo a" in text and "echo b" in text


def test_shell_script_probes_run_as_subshells_of_the_batch_without_a_new_sh(tmp_path):
    # Each `sh -c SCRIPT sh ARGS` probe keeps its own $1.., variables and exit, but starts no `sh`:
    # strace counts every program the batch starts (the batch's own `sh -s` is the only sh).
    probes = [
        ["sh", "-c", 'x=first; echo "$1 $# $x"; exit 4', "sh", "a b", "c"],
        ["sh", "-c", 'echo "${x:-unset} $#"'],
        ["sh", "-c", 'set -e; false; echo not-here', "sh"],
        ["sh", "-c", 'case $1 in a) echo "case a";; esac', "sh", "a"],
    ]
    log = tmp_path / "execve.log"

    class Traced(LocalTransport):
        def _exec(self, argv, stdin, sink, timeout):
            return super()._exec(["strace", "-f", "-qq", "-e", "trace=execve", "-e", "signal=none",
                                  "-o", str(log), *argv], stdin, sink, timeout)

    results = probe.run_batch(Traced(), probes)
    assert [(r.exit_code, r.output) for r in results] == [(4, "a b 2 first\n"), (0, "unset 0\n"), (1, ""),
                                                           (0, "case a\n")]
    started = [line for line in log.read_text().splitlines() if "execve(" in line and "= 0" in line]
    assert len([line for line in started if '"sh"' in line or "/sh\"" in line]) == 1, started
