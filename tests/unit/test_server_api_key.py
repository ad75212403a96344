"""server_api_key lives in 0600 root-owned files the units read (EnvironmentFile= or SGLang's
--config YAML), never in a unit file, an argv or a diff; the router gets it in memory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode import roles, variables
from gpunode.engine import passes
from gpunode.errors import InventoryError
from gpunode.resolve import resolve
from gpunode.roles.context import RoleContext
from gpunode.steps import reads
from gpunode.steps.base import Probe
from gpunode.steps.files import File, Template
from gpunode.steps.secretfiles import ROUTER_KEY_ENV, router_launch
from tests.unit import systemd_parse
from tests.unit.resolve_facts import field_notes

# the shipped roles load as a user's do (gpunode.roles.module), not as gpunode.roles.<name>
servers_role = roles.module("servers")

KEY = 'sk-unit-"q\\uo$HOME%n`x-0123456789'


def steps(**extra) -> dict[str, object]:
    v = {**roles.defaults(), "model_source": "/dev/shm/Qwen3.6-27B", **extra}
    variables.check(v)
    ctx = RoleContext(target="kpro6/200", vars=v, facts=field_notes(), plan=resolve(field_notes(), v))
    return {s.id: s for plan in servers_role.build(ctx) for s in plan.steps}


def unit(found: dict, name: str) -> list[tuple[str, str, str]]:
    t = found[f"file:/etc/systemd/system/{name}"]
    assert isinstance(t, Template) and KEY not in t.content and "sk-unit" not in t.content
    return systemd_parse.settings(t.content)


def values(settings, key: str) -> list[str]:
    return [v for _, k, v in settings if k == key]


def secret(found: dict, path: str) -> File:
    f = found[f"file:{path}"]
    assert isinstance(f, File) and f.mode == 0o600 and f.owner == "root:root" and f.sensitive
    return f


def test_sglang_servers_read_the_key_from_a_0600_config_yaml_and_argv_names_only_its_path():
    import yaml

    found = steps(server_api_key=KEY)
    f = secret(found, "/etc/gpunode/gpu0.secrets.yaml")
    assert yaml.safe_load(f.content) == {"api-key": KEY}  # SGLang reads it with yaml.safe_load
    assert f.notify == ("restart:gpunode-gpu0.service",)
    server = unit(found, "gpunode-gpu0.service")
    argv = systemd_parse.exec_words(values(server, "ExecStart")[0])
    assert argv[-2:] == ["--config", "/etc/gpunode/gpu0.secrets.yaml"] and KEY not in argv
    assert values(server, "EnvironmentFile") == ["/etc/gpunode/gpu0.env"]


def test_vllm_servers_get_a_second_environment_file_with_vllm_api_key():
    found = steps(server_api_key=KEY, engine="vllm")
    f = secret(found, "/etc/gpunode/gpu0.secrets.env")
    assert systemd_parse.env_file(str(f.content)) == {"VLLM_API_KEY": KEY}
    server = unit(found, "gpunode-gpu0.service")
    assert values(server, "EnvironmentFile") == ["/etc/gpunode/gpu0.env", "/etc/gpunode/gpu0.secrets.env"]
    assert "--config" not in systemd_parse.exec_words(values(server, "ExecStart")[0])


def test_the_router_reads_the_key_from_its_own_secret_file_and_the_readiness_check_sends_it_on_stdin():
    found = steps(server_api_key=KEY)
    f = secret(found, "/etc/gpunode/router.secrets.env")
    assert systemd_parse.env_file(str(f.content)) == {ROUTER_KEY_ENV: KEY}
    router = unit(found, "gpunode-router.service")
    assert values(router, "EnvironmentFile") == ["/etc/gpunode/router.env", "/etc/gpunode/router.secrets.env"]
    argv = systemd_parse.exec_words(values(router, "ExecStart")[0])
    assert argv[1] == "-c" and "--worker-urls" in argv and "--api-key" not in argv
    (ready,) = [s for i, s in found.items() if i.startswith("ready:")]
    assert f'header = "Authorization: Bearer {KEY.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"' \
        in ready.auth
    assert KEY not in repr(ready)


def test_without_a_key_there_is_no_secret_file_and_nothing_changes_in_the_units():
    found = steps()
    assert not [i for i in found if ".secrets." in i and not i.startswith("absent:")]
    assert values(unit(found, "gpunode-gpu0.service"), "EnvironmentFile") == ["/etc/gpunode/gpu0.env"]
    router = systemd_parse.exec_words(values(unit(found, "gpunode-router.service"), "ExecStart")[0])
    assert router[1:3] == ["-m", "sglang_router.launch_router"]


def test_a_key_removed_or_left_by_the_other_engine_form_is_removed_after_the_unit_that_read_it():
    without = list(steps())
    gone = [i for i in without if i.startswith("absent:") and ".secrets." in i]
    assert {"absent:/etc/gpunode/gpu0.secrets.env", "absent:/etc/gpunode/gpu0.secrets.yaml",
            "absent:/etc/gpunode/router.secrets.env"} <= set(gone)
    assert without.index("absent:/etc/gpunode/gpu0.secrets.yaml") > without.index(
        "file:/etc/systemd/system/gpunode-gpu0.service")
    keyed = steps(server_api_key=KEY)
    # SGLang reads its key from the YAML: the env form of an earlier vLLM plan goes, the YAML stays
    assert "file:/etc/gpunode/gpu0.secrets.yaml" in keyed and "absent:/etc/gpunode/gpu0.secrets.env" in keyed
    assert "absent:/etc/gpunode/gpu0.secrets.yaml" not in keyed
    assert "absent:/etc/gpunode/router.secrets.env" not in keyed


def test_the_same_key_gives_the_same_bytes_and_a_new_key_restarts_only_what_reads_it():
    one, same, other = steps(server_api_key=KEY), steps(server_api_key=KEY), steps(server_api_key=KEY + "2")
    changed = {i for i in one if isinstance(one[i], File) and one[i].sha256 != other[i].sha256}  # type: ignore
    assert all(one[i].sha256 == same[i].sha256 for i in one if isinstance(one[i], File))  # type: ignore
    assert changed == {i for i in one if ".secrets." in i and isinstance(one[i], File)}


def test_a_secret_file_s_diff_is_masked_and_its_old_content_never_crosses_the_wire():
    f = secret(steps(server_api_key=KEY), "/etc/gpunode/gpu0.secrets.yaml")
    assert f.probe()[6] == "0"  # head -c 0: the old key is not sent back
    folded = passes.fold([f.batched()])  # and a batch hashes it on the target, never reads it whole
    assert folded.asked.get(reads.HASH) == [f.path] and reads.READ not in folded.asked
    created = f.check(Probe(0, "missing\n"))
    updated = f.check(Probe(0, "file 600 root root 40\n" + "0" * 64 + "\n"))
    for outcome in (created, updated):
        assert outcome.diff.startswith("(secret changed") and "sk-unit" not in outcome.diff + outcome.summary


def test_a_bad_key_is_refused_without_echoing_it():
    with pytest.raises(InventoryError) as refused:
        variables.check({"server_api_key": "sk-bad\nExecStartPre=/bin/x"}, {"server_api_key": "--set"})
    assert "server_api_key=..." in str(refused.value) and "sk-bad" not in str(refused.value)


def test_the_router_launcher_hands_the_key_to_the_module_in_memory_only(tmp_path: Path):
    """The launcher runs for real: the module sees --api-key KEY, /proc/self/cmdline does not."""
    (tmp_path / "fake_router.py").write_text(
        "import sys\nprint(repr(sys.argv[1:]))\nprint(repr(open('/proc/self/cmdline', 'rb').read()))\n")
    out = subprocess.run([sys.executable, "-c", router_launch("fake_router"), "--host", "127.0.0.1"],
                         env={**os.environ, ROUTER_KEY_ENV: KEY, "PYTHONPATH": str(tmp_path)},
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == repr(["--api-key", KEY, "--host", "127.0.0.1"])
    assert "sk-unit" not in out[1] and "127.0.0.1" in out[1]
