"""Every JIT and compile cache a server fills goes to cuda_jit_cache, a folder that outlives
restarts, reboots, an upgrade that makes the venv again, and `inv teardown` (without --purge).

Checked on the units rendered for a recorded GPU node (the H100 of tests/data/device/h100-serve,
pin set cu13-b); the variables and the wheels' lines that read them are in
tests/data/jit-caches/README.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpunode import roles
from gpunode.errors import InventoryError
from gpunode.facts import snapshot
from gpunode.facts.parse import parse
from gpunode.resolve import resolve
from gpunode.resolve.toolkit import jit_env
from gpunode.steps.files import Directory, File
from tests.unit import systemd_parse

# the shipped roles load as a user's do (gpunode.roles.module), not as gpunode.roles.<name>
cuda_fixes = roles.module("cuda_fixes")
servers_role = roles.module("servers")

DATA = Path(__file__).resolve().parents[1] / "data"
SOURCES = DATA / "jit-caches" / "README.md"


def _ctx(**variables):
    facts = parse(snapshot.load(DATA / "device" / "h100-serve" / "facts-dense"))
    v = {**roles.defaults(), "pinset": "cu13-b", "model_source": "/root/proof/models/tiny-qwen3",
         "servers_router": False, **variables}
    return roles.RoleContext(target="h100", vars=v, facts=facts, plan=resolve(facts, v))


def served_env(**variables) -> dict[str, str]:
    ctx = _ctx(**variables)
    steps = {s.id: s for plan in servers_role.build(ctx) for s in plan.steps}
    env_file = steps["file:/etc/gpunode/gpu0.env"]
    assert isinstance(env_file, File)
    return systemd_parse.env_file(str(env_file.content))


def test_jit_env_sets_exactly_the_variables_whose_readers_are_recorded():
    recorded = set(re.findall(r"^\| `([A-Z_]+)` \|", SOURCES.read_text(), re.M))
    assert set(jit_env("/c")) - {"HOME"} == recorded


@pytest.mark.parametrize("cache", ["/var/cache/gpunode/jit", "/srv/jit"])
def test_every_cache_of_the_gpu_servers_is_under_cuda_jit_cache(cache):
    env = served_env(cuda_jit_cache=cache)
    venv = _ctx().plan.venv
    caches = {k: v for k, v in env.items() if k in jit_env(cache) and k != "HOME"}
    # the ones that went to /tmp (lost at reboot) or to /root before
    assert {"TORCHINDUCTOR_CACHE_DIR", "CUTE_DSL_CACHE_DIR", "QUACK_CACHE_DIR", "CUDA_CACHE_PATH",
            "SGLANG_DG_CACHE_DIR", "SGLANG_CACHE_DIR", "TILELANG_CACHE_DIR"} <= set(caches)
    for name, path in caches.items():
        assert path == cache or path.startswith(cache + "/"), (name, path)
        assert not path.startswith((venv, "/tmp", "/run", "/dev/shm")), (name, path)
    assert env["TORCHINDUCTOR_CACHE_DIR"] == f"{cache}/torchinductor"
    assert env["FLASHINFER_WORKSPACE_BASE"] == cache  # its cache is <base>/.cache/flashinfer (fixes.yml resets it)
    assert len(set(caches.values()) - {cache}) == len(caches) - 2  # one folder each, but XDG's and flashinfer's


def test_cuda_fixes_makes_the_folder_the_units_name():
    ctx = _ctx(cuda_jit_cache="/srv/jit")
    dirs = [s.path for plan in cuda_fixes.build(ctx) for s in plan.steps if isinstance(s, Directory)]
    assert dirs == ["/srv/jit"]


@pytest.mark.parametrize(("cache", "under"), [("/tmp/jit", "/tmp"), ("/run/gpunode/jit", "/run"),
                                              ("/dev/shm/jit", "/dev/shm"), ("/var/tmp/jit", "/var/tmp"),
                                              ("/opt/gpunode/venvs/jit", "/opt/gpunode/venvs")])
def test_a_cache_folder_that_would_not_outlive_a_reboot_or_an_upgrade_is_refused(cache, under):
    with pytest.raises(InventoryError, match=rf"h100: cuda_jit_cache='{cache}' is under {under} ") as info:
        cuda_fixes.build(_ctx(cuda_jit_cache=cache))
    assert "/var/cache/gpunode/jit" in (info.value.hint or "")


def test_a_venv_root_of_the_inventory_s_own_is_refused_too():
    with pytest.raises(InventoryError, match=r"is under /srv/venvs \(venv_root"):
        cuda_fixes.build(_ctx(cuda_jit_cache="/srv/venvs/cache", venv_root="/srv/venvs"))
    assert cuda_fixes.build(_ctx(cuda_jit_cache="/srv/venvs-cache", venv_root="/srv/venvs"))


def test_teardown_keeps_the_jit_cache_unless_purge(tmp_path, monkeypatch):
    """The real listing script on this machine, the cache folder moved into the test's own."""
    from gpunode.fleet import teardown
    from gpunode.transport import LocalTransport

    cache = tmp_path / "var-cache-gpunode"
    (cache / "jit" / "triton").mkdir(parents=True)
    monkeypatch.setattr(teardown, "CACHE", str(cache))
    state = str(tmp_path / "state")
    kept = teardown.plan(LocalTransport(), str(tmp_path / "shm"), state, purge=False)
    assert str(cache) not in [p for _, p in kept.paths]
    purged = teardown.plan(LocalTransport(), str(tmp_path / "shm"), state, purge=True)
    assert str(cache) in [p for _, p in purged.paths]
