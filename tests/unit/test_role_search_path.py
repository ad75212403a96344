"""A user's roles and templates: found next to the inventory and in roles_path / templates_path,
before the shipped ones; a user role says where it runs; --only and the types work for it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpunode import roles, searchpath, settings, variables
from gpunode.cli.common import load_inventory
from gpunode.errors import InventoryError
from gpunode.steps.base import Probe
from gpunode.steps.files import Template
from gpunode.steps.render import render_from


@pytest.fixture(autouse=True)
def no_user_folders(monkeypatch):
    for name in ("GPUNODE_ROLES_PATH", "GPUNODE_TEMPLATES_PATH", "GPUNODE_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    yield
    searchpath.use()


def user_role(root: Path, name: str, placement: str = "", types: str = "", defaults: str = "") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "role.py").write_text(
        "from gpunode.engine import RolePlan\nfrom gpunode.steps.files import Directory\n"
        f"{placement}\n\n\ndef build(ctx):\n"
        f"    return [RolePlan({name!r}, [Directory(ctx.vars[{name + '_dir'!r}])])]\n")
    (folder / "defaults.yml").write_text(defaults or f"{name}_dir: /srv/{name}\n")
    (folder / "types.yml").write_text(types or f"{name}_dir: path\n")
    (folder / "README.md").write_text(f"# {name}\n")
    return folder


def also(folder: Path, code: str) -> None:
    """More code at the end of a role's role.py."""
    with (folder / "role.py").open("a") as f:
        f.write(code)


def built(name: str) -> list:
    """The role's plans for host h1 with the defaults, as provision builds them."""
    return roles.build([name], roles.RoleContext(target="h1", vars=roles.defaults(), facts=None, plan=None))


def inventory_in(project: Path) -> Path:
    project.mkdir(parents=True, exist_ok=True)
    (project / "hosts.yml").write_text("hosts:\n  h1:\n    address: 127.0.0.1\n")
    return project / "hosts.yml"


def test_a_user_role_runs_where_it_says(tmp_path):
    user_role(tmp_path / "roles", "exporter", 'DEPENDS = ("base",)\nAFTER = ("servers",)')
    user_role(tmp_path / "roles", "proxy", 'AFTER = ("weights",)\nBEFORE = ("servers",)')
    user_role(tmp_path / "roles", "extra")  # says nothing: after the shipped roles
    searchpath.use(inventory_in(tmp_path))
    assert roles.order() == ("base", "engine", "cuda_fixes", "weights", "proxy", "servers", "exporter", "extra")
    assert roles.select("exporter") == (["exporter"], ["base"])
    assert roles.select("proxy,servers")[0] == ["proxy", "servers"]
    searchpath.use()
    assert roles.order() == roles.shipped() == ("base", "engine", "cuda_fixes", "weights", "servers")


def test_only_names_the_user_roles_when_it_does_not_know_one(tmp_path):
    user_role(tmp_path / "roles", "exporter")
    searchpath.use(inventory_in(tmp_path))
    with pytest.raises(InventoryError, match="unknown role 'exporer'") as err:
        roles.select("exporer")
    assert "exporter" in err.value.hint


def test_a_cycle_and_an_unknown_neighbour_are_refused_with_the_file(tmp_path):
    user_role(tmp_path / "a" / "roles", "one", 'AFTER = ("two",)')
    user_role(tmp_path / "a" / "roles", "two", 'AFTER = ("one",)')
    searchpath.use(inventory_in(tmp_path / "a"))
    with pytest.raises(InventoryError, match="the roles one, two wait for each other") as err:
        roles.order()
    assert str(tmp_path / "a" / "roles" / "one" / "role.py") in err.value.hint
    user_role(tmp_path / "b" / "roles", "lone", 'AFTER = ("sevrers",)')
    searchpath.use(inventory_in(tmp_path / "b"))
    with pytest.raises(InventoryError, match=r"AFTER in .*lone/role.py names 'sevrers', which is no role"):
        roles.order()


def test_a_user_role_that_does_not_load_is_named(tmp_path):
    folder = user_role(tmp_path / "roles", "broken")
    (folder / "role.py").write_text("def build(ctx) ->\n")
    searchpath.use(inventory_in(tmp_path))
    with pytest.raises(InventoryError, match=r"role broken: .*broken/role.py does not load: SyntaxError"):
        roles.order()


def test_a_user_roles_defaults_and_types_join_the_shipped_ones(tmp_path):
    user_role(tmp_path / "roles", "exporter", defaults="exporter_dir: /srv/exporter\nexporter_port: 9100\n",
              types="exporter_dir: path\nexporter_port: port\n")
    searchpath.use(inventory_in(tmp_path))
    assert roles.defaults()["exporter_port"] == 9100
    assert "base_packages" in roles.defaults()
    exporter_port = variables.registry()["exporter_port"]
    assert (exporter_port.type, exporter_port.readers) == ("port", ("exporter",))
    with pytest.raises(InventoryError, match=r"exporter_port=70000 \(from --set\)"):
        variables.check({"exporter_port": 70000}, {"exporter_port": "--set"})


def test_the_inventorys_folder_comes_before_roles_path_and_both_before_the_shipped(tmp_path, monkeypatch):
    user_role(tmp_path / "proj" / "roles", "exporter", defaults="exporter_dir: /srv/near\n")
    user_role(tmp_path / "more", "exporter", defaults="exporter_dir: /srv/far\n")
    user_role(tmp_path / "more", "other")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "proj" / "gpunode.yaml").write_text("roles_path: ../more\n")  # relative to its own folder
    monkeypatch.setenv("GPUNODE_CONFIG", str(tmp_path / "proj" / "gpunode.yaml"))
    load_inventory(str(inventory_in(tmp_path / "proj")))
    assert searchpath.current().roles == ((tmp_path / "proj" / "roles").resolve(), (tmp_path / "more").resolve())
    assert roles.defaults()["exporter_dir"] == "/srv/near"
    assert roles.order()[-2:] == ("exporter", "other")


def test_a_settings_folder_that_does_not_exist_is_named(tmp_path, monkeypatch):
    (tmp_path / "gpunode.yaml").write_text("templates_path: [nowhere]\n")
    monkeypatch.setenv("GPUNODE_CONFIG", str(tmp_path / "gpunode.yaml"))
    with pytest.raises(InventoryError, match=rf"templates_path: {tmp_path}/nowhere is not a folder"):
        load_inventory(str(inventory_in(tmp_path / "proj")))
    (tmp_path / "gpunode.yaml").write_text("roles_path: 3\n")
    with pytest.raises(InventoryError, match="roles_path must be a folder or a list of folders"):
        settings.load()


def test_the_repositorys_own_folders_are_shipped_not_user_folders():
    searchpath.use(Path("inventory"))  # the checkout's inventory/: its roles/ beside it is the shipped one
    assert searchpath.current().roles == () and searchpath.current().templates == ()


def test_a_user_template_overrides_the_shipped_one_and_the_check_says_which_file(tmp_path):
    shipped_text, shipped_from = render_from("weights/stage-weights.sh", {}, comment=None)
    assert searchpath.is_shipped(Path(shipped_from))
    ours = tmp_path / "templates" / "weights" / "stage-weights.sh"
    ours.parent.mkdir(parents=True)
    ours.write_text("#!/bin/sh\necho ours\n")
    searchpath.use(inventory_in(tmp_path))
    text, source = render_from("weights/stage-weights.sh", {}, comment=None)
    assert (text, source) == ("#!/bin/sh\necho ours\n", str(ours.resolve()))

    step = Template(str(tmp_path / "out.sh"), template="weights/stage-weights.sh", comment=None)
    outcome = step.check(Probe(0, "missing\n"))
    assert outcome.summary.endswith(f"(template {ours.resolve()})")
    searchpath.use()
    step = Template(str(tmp_path / "out.sh"), template="weights/stage-weights.sh", comment=None)
    outcome = step.check(Probe(0, "missing\n"))
    assert outcome.summary.endswith("(template weights/stage-weights.sh, shipped)")
    assert step.content == shipped_text


EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def test_the_example_role_from_docs_runs_after_the_servers_and_says_what_teardown_removes():
    searchpath.use(roles_path=[str(EXAMPLES / "roles")], templates_path=[str(EXAMPLES / "templates")])
    assert roles.order()[-2:] == ("servers", "node_metrics")
    assert roles.select("node_metrics") == (["node_metrics"], ["base"])
    v = roles.defaults()
    variables.check(v)
    assert roles.removals(v) == ["/etc/gpunode-node-metrics", "/var/lib/gpunode-node-metrics"]
    ctx = roles.RoleContext(target="lab/200", vars={**v, "node_metrics_labels": {"rack": 'r"1'}}, facts=None,
                            plan=None)
    (plan,) = roles.build(["node_metrics"], ctx)
    assert [s.id for s in plan.steps] == [
        "dir:/etc/gpunode-node-metrics", "dir:/var/lib/gpunode-node-metrics",
        "file:/etc/gpunode-node-metrics/node-metrics.env", "file:/var/lib/gpunode-node-metrics/metrics",
        "unit:gpunode-node-metrics.service", "service:gpunode-node-metrics.service"]
    assert 'gpunode_node_info{target="lab/200",rack="r\\"1"} 1' in plan.steps[3].content


def test_a_removal_outside_the_roles_own_folders_is_refused(tmp_path):
    folder = user_role(tmp_path / "roles", "greedy")
    also(folder, "\n\ndef removes(vars):\n    return ['/var/lib']\n")
    searchpath.use(inventory_in(tmp_path))
    with pytest.raises(InventoryError, match=r"role greedy: removes\(\) in .*greedy/role.py gave '/var/lib'"):
        roles.removals(roles.defaults())


@pytest.mark.parametrize("given", ["my-site", "my-site/hosts.yml"])
def test_a_sites_roles_and_templates_are_found_with_the_folder_or_its_hosts_file(tmp_path, monkeypatch, given):
    """docs/extending.md's my-site/{hosts.yml, roles/, templates/}: `-i my-site` finds the same
    role and template as `-i my-site/hosts.yml` (the folder form once ran the shipped ones only)."""
    monkeypatch.chdir(tmp_path)
    inventory_in(tmp_path / "my-site")
    user_role(tmp_path / "my-site" / "roles", "exporter")
    (tmp_path / "my-site" / "templates").mkdir()
    (tmp_path / "my-site" / "templates" / "server.service.j2").write_text("# the site's own unit\n")
    load_inventory(given)
    assert searchpath.current().roles == ((tmp_path / "my-site" / "roles").resolve(),)
    assert searchpath.current().templates == ((tmp_path / "my-site" / "templates").resolve(),)
    assert "exporter" in roles.order()


# --- issue 41: a user role's code and its removes() --------------------------------------------

@pytest.mark.parametrize(("code", "said"), [
    ("raise SystemExit(0)", r"role quits: .*quits/role\.py does not load: SystemExit"),
    ("raise RuntimeError('no')", r"role quits: .*quits/role\.py does not load: RuntimeError: no"),
])
def test_a_role_py_that_exits_or_raises_on_import_is_an_error_naming_it(tmp_path, code, said):
    folder = user_role(tmp_path / "roles", "quits")
    (folder / "role.py").write_text(code + "\n" + (folder / "role.py").read_text())
    searchpath.use(inventory_in(tmp_path))
    with pytest.raises(InventoryError, match=said):
        built("quits")


@pytest.mark.parametrize("function", ["build", "removes"])
def test_a_role_function_that_exits_is_an_error_naming_it(tmp_path, function):
    folder = user_role(tmp_path / "roles", "quits")
    also(folder, f"\n\ndef {function}(arg):\n    raise SystemExit(0)\n")
    searchpath.use(inventory_in(tmp_path))
    with pytest.raises(InventoryError, match=rf"role quits: {function}\(\) in .*quits/role\.py raised SystemExit"):
        if function == "build":
            built("quits")
        else:
            roles.removals(roles.defaults())


@pytest.mark.parametrize("path", ["/etc/ssh", "/var/lib/dpkg", "/root/.ssh", "/boot/grub", "/home/user/.ssh/x"])
def test_teardown_removes_no_path_that_does_not_name_gpunode_or_the_role(tmp_path, path):
    folder = user_role(tmp_path / "roles", "greedy")
    also(folder, f"\n\ndef removes(vars):\n    return ['/etc/greedy', {path!r}]\n")
    searchpath.use(inventory_in(tmp_path))
    with pytest.raises(InventoryError, match=rf"removes\(\) in .*greedy/role.py gave '{path}'"):
        roles.removals(roles.defaults())


@pytest.mark.parametrize("answer", ["'/etc/odd'", "None", "['/etc/ssh']"])
def test_a_bad_removes_is_refused_when_the_role_is_built_not_first_at_teardown(tmp_path, answer):
    """issue 41: removes() giving a text passed provision and --check and was refused only by teardown."""
    folder = user_role(tmp_path / "roles", "odd")
    also(folder, f"\n\ndef removes(vars):\n    return {answer}\n")
    searchpath.use(inventory_in(tmp_path))
    with pytest.raises(InventoryError, match=r"role odd: removes\(\) in .*odd/role\.py gave"):
        built("odd")


def test_the_example_roles_label_keys_are_checked_before_they_reach_the_metrics_file():
    searchpath.use(roles_path=[str(EXAMPLES / "roles")], templates_path=[str(EXAMPLES / "templates")])
    v = {**roles.defaults(), "node_metrics_labels": {'a="1"} 9\nforged{b': "x"}}
    with pytest.raises(InventoryError, match="is not a Prometheus label name"):
        roles.build(["node_metrics"], roles.RoleContext(target="lab/200", vars=v, facts=None, plan=None))


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))


@pytest.mark.parametrize(("file", "make", "said"), [
    ("defaults.yml", lambda p: p.write_text(BOMB), r"defaults\.yml:\d+: YAML expands to more than"),
    ("defaults.yml", lambda p: os.mkfifo(p), r"defaults\.yml: YAML file is a named pipe \(FIFO\)"),
    ("types.yml", lambda p: p.write_text("- a\n- b\n"), r"types\.yml: must be a mapping"),
    ("defaults.yml", lambda p: p.write_text("a: [1\n"), r"defaults\.yml:\d+: YAML syntax error"),
])
def test_a_role_file_goes_through_the_inventorys_reader(tmp_path, file, make, said):
    """issue 41: a 1 KB alias bomb in defaults.yml hung gpunode; a FIFO was skipped without a word."""
    folder = user_role(tmp_path / "roles", "odd")
    (folder / file).unlink()
    make(folder / file)
    assert (folder / file).stat().st_size < 1024
    searchpath.use(inventory_in(tmp_path))
    with pytest.raises(InventoryError, match=said):
        roles.defaults()
        variables.check(roles.defaults())


@pytest.mark.parametrize(("make", "said"), [
    (lambda p: p.symlink_to("role.py"), "its role.py is a symbolic link whose links lead round in a loop"),
    (lambda p: p.symlink_to("gone.py"), "its role.py is a symbolic link to 'gone.py', which does not exist"),
    (lambda p: os.mkfifo(p), "its role.py is no regular file"),
    (lambda p: p.mkdir(), "its role.py is no regular file"),
])
def test_a_role_py_that_is_no_file_is_refused_naming_the_folder(tmp_path, make, said):
    """issue 41: a role.py that is a link loop was skipped without a word (--only said "unknown role")."""
    folder = user_role(tmp_path / "roles", "odd")
    (folder / "role.py").unlink()
    make(folder / "role.py")
    searchpath.use(inventory_in(tmp_path))
    with pytest.raises(InventoryError, match=f"role folder {folder}: {said}"):
        roles.names()


@pytest.mark.parametrize(("body", "said"), [
    (None, r"role odd: .*odd/role\.py has no build\(ctx\) function"),
    ("    return None\n", r"role odd: build\(\) in .*odd/role\.py gave NoneType 'None' where a list of RolePlan"),
    ("    return 'x'\n", r"gave str 'x' where a list of RolePlan belongs"),
    ("    return [1]\n", r"gave int '1' where a list of RolePlan belongs"),
])
def test_a_build_that_is_missing_or_gives_no_role_plans_is_an_error_naming_it(tmp_path, body, said):
    """issue 41: no build(), or one that gave None or a text, was an internal error deep in the engine."""
    folder = user_role(tmp_path / "roles", "odd")
    text = (folder / "role.py").read_text().replace("def build(ctx):", "def made(ctx):")
    (folder / "role.py").write_text(text + (f"\n\ndef build(ctx):\n{body}" if body else ""))
    searchpath.use(inventory_in(tmp_path))
    with pytest.raises(InventoryError, match=said):
        built("odd")


@pytest.mark.parametrize(("types", "said"), [
    ("odd_dir: pathz\n", r"odd/types\.yml:1: variable odd_dir has unknown type 'pathz'"),
    ("odd_dir: [1]\n", r"odd/types\.yml:1: variable odd_dir has the type \[1\], which is no type name"),
    ("odd_dir:\n", r"odd/types\.yml:1: variable odd_dir has the type None, which is no type name"),
    ("odd_dir: path\n1: path\n", r"odd/types\.yml:2: 1 is no variable name"),
    ("odd_dir: path\ngpus: words\n", r"variable gpus is 'words' in .*odd/types\.yml but 'gpus' in resolve/types\.yml"),
])
def test_a_types_yml_line_that_is_no_declaration_is_refused_with_its_line(tmp_path, types, said):
    """issue 41: an unknown type name, a list or nothing as the type were internal errors."""
    user_role(tmp_path / "roles", "odd", types=types)
    searchpath.use(inventory_in(tmp_path))
    with pytest.raises(InventoryError, match=said) as refused:
        variables.registry()
    assert refused.value.hint


@pytest.mark.parametrize(("defaults", "said"), [
    ("yes: 1\n", r"odd/defaults\.yml:1: yes/true/on is read by YAML as True, not a variable name"),
    ("odd_dir: /srv/odd\n~: 1\n", r"odd/defaults\.yml:2: ~ \(or null\) is read by YAML as None, not a variable name"),
])
def test_a_defaults_key_yaml_reads_as_no_name_is_refused_with_its_line(tmp_path, defaults, said):
    """issue 41: `yes: 1` in a role's defaults.yml was reported as an unknown variable "True", without a line."""
    user_role(tmp_path / "roles", "odd", defaults=defaults)
    searchpath.use(inventory_in(tmp_path))
    with pytest.raises(InventoryError, match=said):
        roles.defaults()


def test_a_user_role_of_a_shipped_name_replaces_it_wholly(tmp_path):
    """Its code, its defaults, its types and its place: nothing of the shipped servers role is left."""
    user_role(tmp_path / "roles", "servers")  # says nothing: after the (other) shipped roles
    searchpath.use(inventory_in(tmp_path))
    assert roles.order() == ("base", "engine", "cuda_fixes", "weights", "servers")
    assert roles.select("servers") == (["servers"], [])  # the shipped one's DEPENDS went with it
    assert [(p.name, [s.id for s in p.steps]) for p in built("servers")] == [("servers", ["dir:/srv/servers"])]
    assert "servers_dir" in roles.defaults() and "servers_drain_s" not in roles.defaults()
    assert "servers_drain_s" not in variables.registry() and variables.registry()["servers_dir"].readers == ("servers",)
    searchpath.use()
    assert "servers_drain_s" in roles.defaults() and roles.select("servers")[1] == ["base", "engine", "cuda_fixes",
                                                                                     "weights"]


def test_a_shipped_role_places_itself_in_its_own_file():
    """No central list: each shipped role.py says its DEPENDS (and AFTER), read as a user role's are."""
    found = roles.catalogue()
    assert all(r.shipped for r in found.values())
    assert {n: (r.depends, r.after) for n, r in found.items()} == {
        "base": ((), ()), "engine": (("base",), ()), "cuda_fixes": (("engine",), ()),
        "weights": (("base",), ("cuda_fixes",)), "servers": (("engine", "cuda_fixes", "weights"), ())}
