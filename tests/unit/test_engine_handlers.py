"""Handlers are rebuilt from their names alone, fire in a fixed order, and fail with evidence."""

from __future__ import annotations

import pytest

from gpunode.engine.handlers import CommandHandler, SystemctlHandler, generic, ordered, resolve
from gpunode.engine.role import RolePlan
from gpunode.errors import StepError
from gpunode.steps.files import File
from gpunode.transport import LocalTransport


def test_generic_names_become_systemctl_actions():
    assert generic("daemon-reload") == CommandHandler("daemon-reload", ("systemctl", "daemon-reload"))
    assert generic("restart:sglang@0.service") == SystemctlHandler("restart:sglang@0.service", "restart",
                                                                  "sglang@0.service")
    assert generic("reload:nginx.service") == SystemctlHandler("reload:nginx.service", "reload", "nginx.service")
    assert generic("restart:bad unit; rm -rf /") is None
    assert generic("make-coffee") is None


def test_a_roles_own_handler_wins_over_the_generic_meaning():
    mine = CommandHandler("restart:x.service", ("true",))
    assert resolve("restart:x.service", {"restart:x.service": mine}) is mine


def test_daemon_reload_first_then_declared_order_then_notification_order():
    declared = {"b": CommandHandler("b", ("true",)), "a": CommandHandler("a", ("true",))}
    names = ["restart:z.service", "a", "daemon-reload", "b", "a", "restart:z.service"]
    assert ordered(names, declared) == ["daemon-reload", "b", "a", "restart:z.service"]


def test_a_failing_command_handler_carries_its_output():
    handler = CommandHandler("flaky", ("sh", "-c", "echo 'unit foo: bad setting' >&2; exit 4"))
    with pytest.raises(StepError) as info:
        handler.run(LocalTransport())
    assert "handler flaky failed (exit code 4)" in str(info.value)
    assert "unit foo: bad setting" in info.value.evidence


def test_role_refuses_unknown_handler_names_and_duplicate_ids(tmp_path):
    with pytest.raises(StepError, match="notifies an unknown handler 'reboot-please'"):
        RolePlan("r", [File(str(tmp_path / "a"), "x", notify=["reboot-please"])])
    with pytest.raises(StepError, match="two steps with the id file:"):
        RolePlan("r", [File(str(tmp_path / "a"), "x"), File(str(tmp_path / "a"), "y")])
