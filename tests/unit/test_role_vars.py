"""Role variables have declared types (roles/*/types.yml), checked once after layering;
a wrong one names the variable, where it came from and the type (issue 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode import inventory, roles, variables
from gpunode.cli.common import select_targets
from gpunode.errors import InventoryError
from gpunode.resolve import resolve
from gpunode.roles.context import RoleContext
from tests.demo_role import demo_on_path  # noqa: F401  (the lab's demo role, whose variables are checked here)
from tests.unit.resolve_facts import field_notes

# the shipped roles load as a user's do (gpunode.roles.module), not as gpunode.roles.<name>
servers_role = roles.module("servers")

HOSTS = """\
hosts:
  h1:
    address: 127.0.0.1
    containers:
      200:
        vars:
          model_source: /mnt/models/tiny
          {line}
"""


def refusal(tmp_path: Path, line: str, sets: dict | None = None) -> str:
    (tmp_path / "hosts.yml").write_text(HOSTS.format(line=line))
    with pytest.raises(InventoryError) as err:
        select_targets(inventory.load(tmp_path / "hosts.yml"), "h1", 200, None, sets or {})
    return str(err.value)


@pytest.mark.usefixtures("demo_on_path")
def test_every_declared_variable_has_a_default_that_fits_its_type():
    defaults = {**roles.defaults(), **roles.defaults(("demo",))}
    declared = {n for n, v in variables.registry().items() if set(v.readers) - {"resolver", "facts", "onboard"}}
    assert set(defaults) <= set(declared), f"defaults without a type: {set(defaults) - set(declared)}"
    variables.check(defaults)


@pytest.mark.parametrize(("line", "words"), [
    ("gpus: [true, -1]", ["gpus=[True, -1]", "True", "GPU indexes"]),
    ("gpus: '0,x,1'", ["gpus='0,x,1'", "separated by commas"]),
    ("gpus: [0, 0]", ["names a GPU twice"]),
    ("demo_port: yes", ["demo_port=True", "YAML reads yes/no", "a port number 1..65535"]),
    ("base_port: 70000", ["base_port=70000", "out of range 1..65535"]),
    ("servers_start_timeout: 1h", ["servers_start_timeout='1h'", "whole seconds or \"infinity\""]),
    ("servers_start_timeout: 1000000000000000000000000000000", ["1..604800, a week"]),  # issue 41
    (f"weights_dest_root: /{'m' * 5000}", ["is 5001 characters long, more than 4096"]),  # issue 41: no cap
    ("weights_dest_root: dev/shm", ["weights_dest_root='dev/shm'", "not an absolute path"]),
    ("weights_stage: 'no'", ["weights_stage='no'", "true or false"]),
    ("engine_installer: conda", ["engine_installer='conda'", "'uv', 'pip'"]),
])
@pytest.mark.usefixtures("demo_on_path")
def test_a_wrong_type_in_the_inventory_names_the_variable_file_and_line(tmp_path, line, words):
    text = refusal(tmp_path, line)
    assert f"(from {tmp_path / 'hosts.yml'}:8)" in text, text
    for word in words:
        assert word in text, text
    assert "Traceback" not in text


def test_a_wrong_type_from_set_says_set(tmp_path):
    text = refusal(tmp_path, "mem_fraction: 0.9", {"gpus": "0,x,1"})
    assert "variable gpus='0,x,1' (from --set)" in text and "hint: fix gpus at --set" in text


def test_good_values_pass_in_their_written_forms(tmp_path):
    (tmp_path / "hosts.yml").write_text(HOSTS.format(line="servers_start_timeout: infinity"))
    (target,) = select_targets(inventory.load(tmp_path / "hosts.yml"), "h1", 200, None,
                               {"gpus": "0,1", "wheelhouse": "", "model_source": "/mnt/a b/Q%h $x"})
    assert target.vars["servers_start_timeout"] == "infinity" and target.vars["gpus"] == "0,1"
    assert target.origins["model_source"] == "--set"


def test_base_port_that_runs_past_65535_with_eight_servers_is_refused():
    v = {**roles.defaults(), "model_source": "/dev/shm/Qwen3.6-27B", "base_port": 65535}
    variables.check(v)  # one port alone is a valid port
    plan = resolve(field_notes(), v)
    assert len(plan.servers) == 8
    ctx = RoleContext(target="kpro6/200", vars=v, facts=field_notes(), plan=plan,
                      origins={"base_port": "inventory/hosts.yml:12"})
    with pytest.raises(InventoryError) as err:
        servers_role.build(ctx)
    text = str(err.value)
    assert "base_port=65535 gives 8 servers the ports 65535..65542, beyond the last port 65535" in text
    assert "set base_port to 65528 or lower (at inventory/hosts.yml:12)" in text
