"""Packages.check on dpkg-query outputs recorded on Debian 12 (see tests/data/steps/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunode.errors import StepError
from gpunode.steps.apt import Packages
from gpunode.steps.base import Change, NoChange, Probe

DATA = Path(__file__).parent.parent / "data" / "steps" / "apt"


def recorded(name: str) -> tuple[list[str], Probe]:
    data = json.loads((DATA / f"{name}.json").read_text())
    return data["argv"], Probe(data["exit_code"], data["output"])


def test_the_recorded_probe_is_the_one_the_step_runs():
    argv, _ = recorded("all-installed")
    assert Packages(["coreutils", "libc6"]).probe() == argv


def test_all_installed_names_versions():
    _, probe = recorded("all-installed")
    assert Packages(["coreutils", "libc6"]).check(probe) == NoChange(
        "all 2 packages are already installed: coreutils 9.1-1, libc6 2.36-9+deb12u14")
    assert Packages(["libc6"]).check(probe) == NoChange(
        "the package is already installed: libc6 2.36-9+deb12u14")


def test_a_package_dpkg_never_heard_of_is_installed():
    _, probe = recorded("one-missing")
    assert probe.exit_code == 1
    assert Packages(["coreutils", "hello"]).check(probe) == Change("install hello")


def test_removed_with_config_kept_and_purged_packages_count_as_missing():
    _, probe = recorded("removed-config-kept")
    assert Packages(["logrotate", "coreutils"]).check(probe) == Change(
        "install logrotate (logrotate removed earlier, config files kept)")
    _, probe = recorded("purged-unknown-state")
    assert Packages(["logrotate", "libc6"]).check(probe) == Change("install logrotate")


def test_a_target_without_dpkg_is_an_error_with_evidence():
    _, probe = recorded("no-dpkg")
    with pytest.raises(StepError, match="dpkg-query exit code 127") as info:
        Packages(["hello"]).check(probe)
    assert "No such file or directory" in info.value.evidence


def test_names_are_validated_before_anything_runs():
    with pytest.raises(StepError, match="not a Debian package name: 'hello; reboot'"):
        Packages(["hello; reboot"])
    assert Packages(["libc6:amd64", "g++"]).id == "apt:libc6:amd64,g++"
