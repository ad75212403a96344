"""Service.check on `systemctl show` outputs recorded in a lab container running systemd 252
(see tests/data/steps/README.md), and Unit as a file step that notifies the right handlers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunode.errors import StepError
from gpunode.steps.base import Change, NoChange, Probe
from gpunode.steps.systemd import Service, Unit, parse_show

DATA = Path(__file__).parent.parent / "data" / "steps" / "systemd"


def recorded(name: str) -> Probe:
    data = json.loads((DATA / f"{name}.json").read_text())
    assert data["argv"][:2] == ["systemctl", "show"]
    return Probe(data["exit_code"], data["output"])


def test_the_recorded_probe_is_the_one_the_step_runs():
    data = json.loads((DATA / "enabled-running.json").read_text())
    assert Service("gpunode-demo.service").probe() == data["argv"]


def test_enabled_and_running_is_a_noop_with_its_state_in_the_sentence():
    assert Service("gpunode-demo.service").check(recorded("enabled-running")) == NoChange(
        "gpunode-demo.service is already enabled and running (active/running)")


def test_a_unit_systemd_does_not_know_yet_is_planned_not_refused():
    # In check mode the unit file is only planned, so systemd says not-found.
    assert Service("gpunode-nosuch.service").check(recorded("not-found")) == Change(
        "enable and start gpunode-nosuch.service (now not loaded yet)")


def test_disabled_and_stopped_is_enabled_and_started_or_left_alone_if_wanted():
    probe = recorded("disabled-inactive")
    assert Service("gpunode-demo.service").check(probe) == Change(
        "enable and start gpunode-demo.service (now disabled, inactive)")
    assert Service("gpunode-demo.service", enabled=False, running=False).check(probe) == NoChange(
        "gpunode-demo.service is already not enabled (disabled) and stopped (inactive)")
    assert Service("gpunode-demo.service", enabled=None, running=True).check(probe) == Change(
        "start gpunode-demo.service (now disabled, inactive)")


def test_static_units_count_as_enabled_and_failed_ones_are_started():
    assert Service("systemd-journald.service").check(recorded("static")) == NoChange(
        "systemd-journald.service is already static and running (active/running)")
    assert Service("gpunode-fail.service").check(recorded("failed")) == Change(
        "start gpunode-fail.service (now static, failed)")


def test_running_units_are_stopped_when_asked():
    assert Service("gpunode-demo.service", enabled=None, running=False).check(
        recorded("enabled-running")) == Change("stop gpunode-demo.service (now enabled, active)")


def test_a_masked_unit_is_an_error_that_says_how_to_unmask():
    with pytest.raises(StepError, match="gpunode-masked.service is masked") as info:
        Service("gpunode-masked.service").check(recorded("masked"))
    assert "systemctl unmask gpunode-masked.service" in info.value.hint


def test_a_target_without_systemd_is_an_error_with_evidence():
    with pytest.raises(StepError, match=r"cannot read the state of x.service from systemd \(systemctl exit code 1\)") \
            as info:
        Service("x.service").check(recorded("no-systemd"))
    assert "System has not been booted with systemd" in info.value.evidence


def test_need_daemon_reload_is_read_but_not_a_change_by_itself():
    probe = recorded("need-daemon-reload")
    assert parse_show(probe.output)["NeedDaemonReload"] == "yes"
    assert isinstance(Service("gpunode-demo.service").check(probe), NoChange)


def test_unit_is_a_file_under_etc_systemd_that_notifies_reload_and_restart():
    unit = Unit("gpunode-demo.service", content="[Service]\nExecStart=/bin/true\n")
    assert unit.id == "unit:gpunode-demo.service"
    assert unit.file.path == "/etc/systemd/system/gpunode-demo.service"
    assert tuple(unit.notify) == ("daemon-reload", "restart:gpunode-demo.service")
    assert tuple(Unit("x.timer", content="", restart=False).notify) == ("daemon-reload",)
    with pytest.raises(StepError, match="not a systemd unit name: 'demo'"):
        Unit("demo", content="")
    with pytest.raises(StepError, match="needs exactly one of content= or template="):
        Unit("a.service")
