"""Overlay and Absent against real folders; LibcudaLink.check on recorded ldconfig output."""

import pytest

from gpunode.errors import StepError
from gpunode.steps.base import Change, NoChange, Probe
from gpunode.steps.cuda import LibcudaLink
from gpunode.steps.trees import Absent, Overlay
from gpunode.transport import LocalTransport


def _check(step, t):
    r = t.run(step.probe())
    return step.check(Probe(r.exit_code, r.stdout + r.stderr))


def test_overlay_copies_then_is_a_noop_and_notices_new_source_content(tmp_path):
    t = LocalTransport()
    cub, thrust = tmp_path / "cccl" / "cub", tmp_path / "cccl" / "thrust"
    (cub / "cub").mkdir(parents=True)
    (thrust / "thrust").mkdir(parents=True)
    (cub / "cub" / "cub.cuh").write_text("// cub 3.3.2\n")
    (thrust / "thrust" / "version.h").write_text("#define THRUST_VERSION 300302\n")
    include = tmp_path / "cuda" / "include"
    include.mkdir(parents=True)
    (include / "cuda_runtime.h").write_text("// toolkit header\n")
    step = Overlay(dest=str(include), sources=[str(cub), str(thrust)])
    assert _check(step, t) == Change(f"overlay 2 folders onto {include}")
    step.apply(t)
    assert (include / "cub" / "cub.cuh").read_text() == "// cub 3.3.2\n"
    assert (include / "cuda_runtime.h").exists()
    again = _check(step, t)
    assert isinstance(again, NoChange) and again.reason.startswith(f"{include} already holds the overlay of 2 folders")
    (thrust / "thrust" / "version.h").write_text("#define THRUST_VERSION 300600\n")
    assert isinstance(_check(step, t), Change)


def test_overlay_of_a_folder_not_installed_yet_says_so(tmp_path):
    step = Overlay(dest=str(tmp_path / "inc"), sources=[str(tmp_path / "venv" / "flashinfer" / "data" / "cccl")])
    outcome = _check(step, LocalTransport())
    assert isinstance(outcome, Change) and "they come with the engine install" in outcome.summary
    with pytest.raises(StepError, match="a source folder does not exist") as info:
        step.apply(LocalTransport())
    assert f"not there: {tmp_path / 'venv'}" in info.value.evidence and "run it first" in info.value.hint
    assert not (tmp_path / "inc").exists()  # refused before anything was made


def test_absent_removes_and_then_reports_nothing_there(tmp_path):
    t = LocalTransport()
    cache = tmp_path / "cache" / "flashinfer"
    (cache / "0.6.11").mkdir(parents=True)
    step = Absent(path=str(cache))
    assert isinstance(_check(step, t), Change)
    step.apply(t)
    assert not cache.exists()
    assert _check(step, t) == NoChange(f"{cache} does not exist")


# `ldconfig -p` lines as awk in the probe reduces them (recorded on Debian 12 with the 580 driver).
def test_libcuda_link_decisions():
    step = LibcudaLink()
    have_both = "libcuda.so.1 /lib/x86_64-linux-gnu/libcuda.so.1\nlibcuda.so /lib/x86_64-linux-gnu/libcuda.so\n"
    assert step.check(Probe(0, have_both)) == NoChange("ldconfig already lists libcuda.so")
    only_one = "libcuda.so.1 /lib/x86_64-linux-gnu/libcuda.so.1\nfile /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
    assert step.check(Probe(0, only_one)) == Change(
        "run ldconfig and link libcuda.so -> libcuda.so.1 in /usr/lib/x86_64-linux-gnu")
    outcome = step.check(Probe(0, ""))
    assert isinstance(outcome, Change)
    assert "libcuda.so.1 is not there yet, so applying this will fail" in outcome.summary
