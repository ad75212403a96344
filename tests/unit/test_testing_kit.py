"""The role-testing kit (gpunode/testing.py) as docs/testing-roles.md uses it: a role whose
paths come from its variables, converged on this machine under a temporary folder."""

from __future__ import annotations

from pathlib import Path

from gpunode.engine import RolePlan
from gpunode.steps.files import Directory, File, Symlink
from gpunode.testing import converge, snapshot


def motd_role(v: dict) -> RolePlan:
    """The example role of docs/testing-roles.md."""
    etc = v["motd_etc"]
    return RolePlan("motd", [Directory(etc), File(f"{etc}/motd", f"{v['motd_text']}\n", mode=0o644),
                             Symlink(v["motd_link"], f"{etc}/motd")])


def test_first_run_changes_second_run_is_one_round_trip_and_changes_nothing(tmp_path: Path):
    v = {"motd_etc": str(tmp_path / "etc"), "motd_text": "hello", "motd_link": str(tmp_path / "motd")}
    first = converge([motd_role(v)], tmp_path / "state")
    assert first.recap.failed == 0 and len(first.changed()) == 3
    assert (tmp_path / "motd").read_text() == "hello\n"
    before = snapshot(tmp_path / "etc")
    again = converge([motd_role(v)], tmp_path / "state")
    assert again.changed() == [] and again.recap.round_trips == 1 and len(again.commands) == 1
    assert snapshot(tmp_path / "etc") == before


def test_check_shows_the_change_and_writes_nothing(tmp_path: Path):
    v = {"motd_etc": str(tmp_path / "etc"), "motd_text": "hello", "motd_link": str(tmp_path / "motd")}
    converge([motd_role(v)], tmp_path / "state")
    before = snapshot(tmp_path)
    planned = converge([motd_role({**v, "motd_text": "bye"})], tmp_path / "state", check=True, diff=True)
    assert planned.changed() == [f"file:{tmp_path}/etc/motd"]
    assert "+bye" in planned.events.by_step()[f"file:{tmp_path}/etc/motd"].diff
    assert snapshot(tmp_path) == before
