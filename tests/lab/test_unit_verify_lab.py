"""A unit file systemd would not load never replaces one that works (issue 29, Medium).

In lab container 200 (real systemd 252): a working unit is written by the Unit step; a new
content that systemd-analyze rejects (an ExecStart that is not there, unbalanced quoting, a
Requires= on a unit that does not exist) is refused with systemd-analyze's own line, the
working file is left byte for byte, and the verification leaves nothing behind in /run.
"""

from __future__ import annotations

import pytest

from gpunode.errors import StepError
from gpunode.steps.systemd import Unit

pytestmark = pytest.mark.lab

NAME = "gpunode-verifytest.service"
PATH = f"/etc/systemd/system/{NAME}"
GOOD = "[Unit]\nDescription=verify test\n[Service]\nExecStart=/bin/sleep 1\n"
BAD = {
    "missing-binary": ("[Service]\nExecStart=/opt/gpunode/venvs/nothere/bin/python -m x\n", "is not executable"),
    "unbalanced-quote": ('[Service]\nExecStart=/bin/true "unterminated\n', "Unbalanced quoting"),
    "requires-missing": ("[Unit]\nRequires=gpunode-nothere.service\n[Service]\nExecStart=/bin/true\n",
                         "gpunode-nothere.service not found"),
}


@pytest.fixture
def working(ct):
    Unit(NAME, content=GOOD).apply(ct)
    yield
    ct.run(["rm", "-f", PATH])


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_unit_systemd_rejects_leaves_the_working_one(ct, working, case):
    content, said = BAD[case]
    with pytest.raises(StepError) as err:
        Unit(NAME, content=content).apply(ct)
    text = str(err.value) + "\n" + (err.value.evidence or "")
    assert f"systemd would not load the new {NAME}" in text and said in text, text
    assert ct.read_file(PATH).decode() == GOOD
    left = ct.run(["sh", "-c", "ls -d /run/gpunode-verify.* 2>/dev/null || true"])
    assert left.stdout.strip() == "", left.stdout


def test_a_unit_systemd_accepts_is_written(ct, working):
    new = GOOD.replace("sleep 1", "sleep 2")
    Unit(NAME, content=new).apply(ct)
    assert ct.read_file(PATH).decode() == new
