"""A venv that was verified stays a no-op once its programs run.

Found by the provision lab test: the router imports typing_extensions (a top-level module)
at run time, which creates site-packages/__pycache__ after the verification; the next run
saw "site-packages changed since it was verified" and reinstalled the router venv.
"""

from __future__ import annotations

from gpunode.steps.base import Change, NoChange, Probe
from gpunode.steps.venv import Venv
from gpunode.transport import LocalTransport
from tests.wheels import make_wheel


def check(step: Venv, t: LocalTransport):
    r = t.run(step.probe())
    return step.check(Probe(r.exit_code, r.stdout))


def test_bytecode_caches_written_at_run_time_are_not_drift(tmp_path):
    make_wheel(tmp_path / "wheels", "gpn-extra", "2.0")
    t = LocalTransport()
    step = Venv(path=str(tmp_path / "venv"), requirements=["gpn-extra==2.0"], no_index=True,
                find_links=[str(tmp_path / "wheels")])
    step.apply(t)
    (site,) = (tmp_path / "venv" / "lib").glob("python3*/site-packages")
    (site / "__pycache__").mkdir(exist_ok=True)
    (site / "__pycache__" / "typing_extensions.cpython-311.pyc").write_bytes(b"\0")
    assert isinstance(check(step, t), NoChange)
    (site / "gpn_stray.py").write_text("")  # a real change of the installed set still shows
    assert isinstance(check(step, t), Change)
