"""Venv step: a real venv, offline installs from a real (tiny) wheelhouse."""

import json

import pytest

from gpunode.errors import StepError
from gpunode.steps.base import Change, NoChange, Probe
from gpunode.steps.venv import Venv
from gpunode.transport import LocalTransport
from tests.wheels import make_wheel


def _check(step, t):
    r = t.run(step.probe())
    return step.check(Probe(r.exit_code, r.stdout))


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory):
    d = tmp_path_factory.mktemp("wheels")
    make_wheel(d, "gpn-engine", "1.0", requires=("gpn-kernel==0.4.1",))
    make_wheel(d, "gpn-engine", "1.1", requires=("gpn-kernel==0.4.2",))
    make_wheel(d, "gpn-kernel", "0.4.1")
    make_wheel(d, "gpn-kernel", "0.4.2")
    make_wheel(d, "gpn-extra", "2.0")
    return d


def _venv(tmp_path, wheelhouse, reqs, **kw):
    return Venv(path=str(tmp_path / "venvs" / "set-a"), requirements=reqs, no_index=True,
                find_links=[str(wheelhouse)], **kw)


def test_install_verify_then_noop(tmp_path, wheelhouse):
    t = LocalTransport()
    step = _venv(tmp_path, wheelhouse, ["gpn-engine==1.0", "gpn-extra==2.0"], remove_after=["gpn-extra"],
                 verify=[["python", "-c", "import gpn_engine, gpn_kernel; assert gpn_kernel.__version__ == '0.4.1'"],
                         ["python", "-m", "pip", "check"]])
    plan = _check(step, t)
    assert isinstance(plan, Change) and plan.summary.startswith("create venv")
    step.apply(t)
    manifest = json.loads((tmp_path / "venvs" / "set-a" / "gpunode-lock.json").read_text())
    assert manifest["spec_hash"] == step.spec_hash()
    again = _check(step, t)
    assert isinstance(again, NoChange) and "matches the resolved pin set (2 requirements" in again.reason
    assert t.run([str(tmp_path / "venvs/set-a/bin/python"), "-c", "import gpn_extra"]).exit_code == 1


def test_new_pin_reinstalls_and_says_what_changed(tmp_path, wheelhouse):
    t = LocalTransport()
    _venv(tmp_path, wheelhouse, ["gpn-engine==1.0"]).apply(t)
    newer = _venv(tmp_path, wheelhouse, ["gpn-engine==1.1"])
    plan = _check(newer, t)
    assert isinstance(plan, Change) and "+gpn-engine==1.1; -gpn-engine==1.0" in plan.summary
    newer.apply(t)
    out = t.run([str(tmp_path / "venvs/set-a/bin/python"), "-c", "import gpn_kernel; print(gpn_kernel.__version__)"])
    assert out.stdout.strip() == "0.4.2"


def test_drift_and_interrupted_install_are_detected(tmp_path, wheelhouse):
    t = LocalTransport()
    step = _venv(tmp_path, wheelhouse, ["gpn-engine==1.0"])
    step.apply(t)
    py = str(tmp_path / "venvs/set-a/bin/python")
    t.run([py, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheelhouse), "gpn-extra"], check=True)
    drift = _check(step, t)
    assert isinstance(drift, Change) and "site-packages changed since it was verified" in drift.summary
    (tmp_path / "venvs/set-a/gpunode-lock.json").unlink()  # as if the run died before the manifest
    cut = _check(step, t)
    assert isinstance(cut, Change) and "a previous install did not finish" in cut.summary


def test_failed_verification_leaves_no_manifest(tmp_path, wheelhouse):
    t = LocalTransport()
    step = _venv(tmp_path, wheelhouse, ["gpn-engine==1.0"], verify=[["python", "-c", "import torch"]])
    with pytest.raises(StepError, match=r"verifying with `python -c 'import torch'` in .*set-a failed"):
        step.apply(t)
    assert not (tmp_path / "venvs/set-a/gpunode-lock.json").exists()
