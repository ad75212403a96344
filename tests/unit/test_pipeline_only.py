"""--only refuses when a role it depends on is not in place, and changes nothing meanwhile."""

import pytest

from gpunode.engine import RolePlan
from gpunode.errors import StepError
from gpunode.facts.types import Facts
from gpunode.inventory import Host, Target
from gpunode.pipeline import Job, check_dependencies
from gpunode.steps.files import Directory
from gpunode.transport import LocalTransport


def _job(tmp_path, needed_dir):
    target = Target(Host(name="local", address="127.0.0.1", connection="local"), None, {})
    needed = [RolePlan("base", [Directory(path=str(needed_dir))])]
    return Job(target, LocalTransport(), Facts(target="local"), None, [], needed, ["base"])


def test_only_refuses_when_a_dependency_would_change(tmp_path):
    missing = tmp_path / "etc-gpunode"
    with pytest.raises(StepError, match=r"--only needs base in place first, but 1 step\(s\) would change") as err:
        check_dependencies(_job(tmp_path, missing))
    assert f"create directory {missing}" in err.value.evidence
    assert "run without --only" in err.value.hint
    assert not missing.exists()  # the check itself changed nothing


def test_only_goes_ahead_when_dependencies_are_in_place(tmp_path):
    present = tmp_path / "etc-gpunode"
    present.mkdir(mode=0o755)
    present.chmod(0o755)
    check_dependencies(_job(tmp_path, present))
