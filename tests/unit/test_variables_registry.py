"""The one registry of variables (gpunode/variables.py, issue 33): every name the code reads is
declared, nothing declared twice with two types, the shipped inventories and the docs' examples
use only known names, and docs/variables.md is the registry rendered."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from gpunode import inventory, roles, variables
from gpunode.cli import vardoc
from gpunode.cli.common import parse_sets, select_targets
from gpunode.errors import InventoryError
from gpunode.fleet import endpoint
from gpunode.resolve import choices
from gpunode.resolve.choices import Choices, from_vars

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "gpunode"
# Where variables are read: a mapping of a target's variables by one of these names, its .vars,
# or pipeline.target_vars(t). `v` is a target's variables too (`v = ctx.vars` in a role, the head's
# in resolve/multinode.py), except in facts/, where it is a row of a GPU report or a model config.
RECEIVERS = {"vars", "variables", "host_vars"}


def _receiver(node: ast.expr, short_v: bool) -> bool:
    if isinstance(node, ast.Name):
        return node.id in RECEIVERS or short_v and node.id == "v"
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id == "target_vars"
    return isinstance(node, ast.Attribute) and node.attr == "vars"


def read_names() -> dict[str, str]:
    """{variable: file:line} for every `vars["x"]`, `vars.get("x")`, `ctx.var("x")`, `ctx.where("x")`
    in the product (the lab is test support and reads no inventory variable)."""
    out: dict[str, str] = {}
    for path in sorted([*SRC.rglob("*.py"), *(ROOT / "roles").rglob("*.py")]):  # the shipped roles sit at the top
        base = SRC if path.is_relative_to(SRC) else ROOT
        if "lab" in path.relative_to(base).parts:
            continue
        short_v = path.relative_to(base).parts[0] != "facts"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            key = None
            if isinstance(node, ast.Subscript) and _receiver(node.value, short_v):
                key = node.slice
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                on_ctx = isinstance(node.func.value, ast.Name) and node.func.value.id == "ctx"
                if (node.func.attr in ("var", "where") and on_ctx
                        or node.func.attr == "get" and _receiver(node.func.value, short_v)):
                    key = node.args[0]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                out.setdefault(key.value, f"{path.relative_to(ROOT)}:{node.lineno}")
    return out


def test_every_variable_the_code_reads_is_in_the_registry():
    read = read_names()
    # the scan sees the roles, the resolver's CLI, the facts probe and onboard, not a handful of names
    assert {"base_packages", "model_source", "venv", "pve_api", "server_api_key", "weights_verify", "multinode",
            "nccl_socket_ifname"} <= set(read)
    missing = {name: at for name, at in read.items() if name not in variables.registry()}
    assert not missing, f"read but not declared in any types.yml: {missing}"


def test_every_choice_the_resolver_reads_is_declared_by_the_resolver():
    resolver = {n for n, v in variables.registry().items() if "resolver" in v.readers}
    assert {f.name for f in dataclasses.fields(Choices)} <= resolver


def test_a_name_declared_with_two_types_is_refused():
    with pytest.raises(ValueError, match=r"variable gpus is 'gpus' in roles/servers/types.yml but 'words' in x.yml"):
        variables.build([("servers", "roles/servers/types.yml", {"gpus": "gpus"}), ("me", "x.yml", {"gpus": "words"})])
    with pytest.raises(ValueError, match=r"x.yml: variable a has unknown type 'colour'"):
        variables.build([("me", "x.yml", {"a": "colour"})])


def test_the_same_type_in_two_declarations_names_both_readers():
    reg = variables.build([("servers", "roles/servers/types.yml", {"gpus": "gpus"}), ("me", "x.yml", {"gpus": "gpus"})])
    assert reg["gpus"].readers == ("servers", "me")  # a user role may declare a name again, with its type
    reg = variables.registry()
    assert reg["base_port"].readers == ("resolver",) and reg["fleet_router_port"].readers == ("fleet",)
    assert reg["venv"].readers == ("facts",) and reg["pve_api"].readers == ("onboard",)


def test_every_shipped_variable_is_typed_once_and_defaulted_once():
    """One home per variable (issue 40): gpunode's own declarations name each variable once, and its
    default is written in one place: a role's defaults.yml, the resolver's Choices or the fleet's."""
    typed: dict[str, list[str]] = {}
    for _, where, types in variables.sources(product_only=True):
        for name in types:
            typed.setdefault(name, []).append(where)
    assert {n: w for n, w in typed.items() if len(w) > 1} == {}
    defaulted: dict[str, list[str]] = {}
    for name in roles.shipped():
        for key in roles.defaults((name,)):
            defaulted.setdefault(key, []).append(f"roles/{name}/defaults.yml")
    for key in choices.DEFAULTS:
        defaulted.setdefault(key, []).append("resolve/choices.py")
    for key in endpoint.DEFAULTS:
        defaulted.setdefault(key, []).append("fleet/endpoint.py")
    assert {n: w for n, w in defaulted.items() if len(w) > 1} == {}
    # and the code that reads a default-less name has no default of its own for it either
    assert not re.findall(r"servers_ready_grace_s\", \d|venv_root\"\) or \"/|weights_dest_root\"\) or \"/|"
                          r"fleet_router_port\"\) or \d", "\n".join(p.read_text() for p in SRC.rglob("*.py")))


@pytest.mark.parametrize(("sets", "words"), [
    (["mem_fractoin=0.9"], ["variable mem_fractoin (from --set) is not one gpunode knows",
                            "did you mean mem_fraction?"]),
    (["engnie=vllm"], ["variable engnie (from --set)", "did you mean engine?"]),
    (["zzqqxx=1"], ["variable zzqqxx (from --set)"]),
    (["server_api_kye=sk-123456789"], ["looks like a secret", "did you mean server_api_key?"]),
])
def test_an_unknown_name_given_with_set_is_refused_with_a_suggestion(sets, words):
    with pytest.raises(InventoryError) as err:
        parse_sets(sets)
    text = str(err.value)
    for word in words:
        assert word in text, text
    assert "sk-123456789" not in text
    if sets == ["zzqqxx=1"]:
        assert "did you mean" not in text


def test_the_resolver_refuses_an_unknown_name_given_to_it_directly():
    with pytest.raises(InventoryError, match="did you mean engine"):
        from_vars({"engnie": "vllm"})
    assert from_vars({"engine": "vllm", "mtp": True, "gpus": "0,1"}).gpus == (0, 1)


def test_a_bad_value_in_group_vars_is_reported_at_its_own_file_and_line(tmp_path):
    # the group sets a variable inline too, so its variables are joined from two files
    (tmp_path / "hosts.yml").write_text("hosts:\n  h1:\n    address: 127.0.0.1\n    containers:\n"
                                        "      200: {vars: {model_source: /mnt/m}}\n"
                                        "groups:\n  g: {hosts: [h1], vars: {engine: vllm}}\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "g.yml").write_text("mem_fraction: 0.9\nrouter_port: 0\n")
    with pytest.raises(InventoryError) as err:
        select_targets(inventory.load(tmp_path), "h1", 200, None, {})
    assert f"variable router_port=0 (from {tmp_path / 'group_vars' / 'g.yml'}:2)" in str(err.value)
    (tmp_path / "group_vars" / "g.yml").write_text("mem_fraction: 0.9\n")
    (target,) = select_targets(inventory.load(tmp_path), "h1", 200, None, {})
    assert target.origins["engine"] == f"{tmp_path / 'hosts.yml'}:7"
    assert target.origins["mem_fraction"] == f"{tmp_path / 'group_vars' / 'g.yml'}:1"


@pytest.mark.parametrize("folder", ["inventory", "inventory/example"])
def test_every_target_of_the_shipped_inventories_passes(folder):
    inv = inventory.load(ROOT / folder)
    for host, vmid in inv.all_targets():
        select_targets(inv, host, vmid, None, {})


def _vars_blocks(node: object) -> list[dict]:
    if isinstance(node, dict):
        found = [node["vars"]] if isinstance(node.get("vars"), dict) else []
        return found + [b for value in node.values() for b in _vars_blocks(value)]
    if isinstance(node, list):
        return [b for item in node for b in _vars_blocks(item)]
    return []


def test_the_docs_yaml_examples_use_only_known_variables():
    names = set()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```yaml\n(.*?)```", doc.read_text(), re.S):
            for found in _vars_blocks(yaml.safe_load(block)):
                names |= set(found)
    assert names, "the inventory page's example has vars"
    assert names <= set(variables.registry()), names - set(variables.registry())


def test_docs_variables_md_is_the_registry_rendered():
    assert vardoc.DOC.read_text() == vardoc.render(), (
        "docs/variables.md is stale: run `python -m gpunode.cli.vardoc` and commit it")
