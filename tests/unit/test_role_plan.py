"""A role reads only the typed plan (issue 33): a user role reads ctx.plan by the names
docs/extending.md documents, mypy refuses a name the plan does not have, the shipped roles
take nothing from each other, and the doc's section lists every field of the plan's parts."""

from __future__ import annotations

import ast
import dataclasses
import re
import types
import typing
from pathlib import Path

from mypy import api as mypy

from gpunode import roles, searchpath
from gpunode.resolve import plan as plan_module
from gpunode.resolve import resolve
from gpunode.resolve.plan import Plan
from tests.unit.resolve_facts import cpu_box

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "extending.md"
SECTION = "## What a role reads from the plan"

ROLE = '''from gpunode.engine import RolePlan
from gpunode.roles.context import RoleContext
from gpunode.steps.files import File


def build(ctx: RoleContext) -> list[RolePlan]:
    plan = ctx.plan
    lines = [f"{s.name} {s.port} {plan.model.served_model_name} {plan.server_env(s)['PORT']}" for s in plan.servers]
    if plan.weights is not None:
        lines.append(f"weights {plan.weights.source} -> {plan.weights.dest}")
    return [RolePlan("lister", [File(path="/etc/lister/servers", content="\\n".join(lines) + "\\n")])]
'''


def user_role(root: Path, text: str) -> Path:
    folder = root / "roles" / "lister"
    folder.mkdir(parents=True)
    (folder / "role.py").write_text(text)
    (folder / "defaults.yml").write_text("{}\n")
    (folder / "types.yml").write_text("{}\n")
    (root / "hosts.yml").write_text("hosts:\n  h1:\n    address: 127.0.0.1\n")
    return folder / "role.py"


def test_a_user_role_reads_the_servers_the_model_and_the_weights_from_the_plan(tmp_path):
    user_role(tmp_path, ROLE)
    v = {**roles.defaults(roles.shipped()), "model_source": "/mnt/models/tiny-qwen3/", "served_model_name": "tiny"}
    try:
        searchpath.use(tmp_path / "hosts.yml")
        ctx = roles.RoleContext(target="lab-cpu", vars=v, facts=cpu_box(), plan=resolve(cpu_box(), v))
        (built,) = roles.build(["lister"], ctx)
    finally:
        searchpath.use()
    assert built.steps[0].content == ("cpu0 30001 tiny 30001\ncpu1 30002 tiny 30002\n"
                                      "weights /mnt/models/tiny-qwen3 -> /dev/shm/tiny-qwen3\n")


def test_mypy_refuses_a_user_role_that_reads_what_the_plan_does_not_have(tmp_path):
    good = user_role(tmp_path / "good", ROLE)
    bad = user_role(tmp_path / "bad", ROLE.replace("plan.model.served_model_name", "plan.model.served_name")
                    .replace("plan.weights.dest", "plan.weights_dest"))
    args = ["--cache-dir", str(tmp_path / "cache"), "--ignore-missing-imports", "--follow-imports=silent",
            "--no-error-summary"]
    assert mypy.run([*args, str(good)])[2] == 0
    out, _, status = mypy.run([*args, str(bad)])
    assert status == 1
    assert '"PlannedModel" has no attribute "served_name"; maybe "served_model_name"?' in out
    assert '"Plan" has no attribute "weights_dest"' in out


def _role_files() -> list[tuple[str, Path]]:
    """(role name, file) for every module of the shipped roles and the example user role."""
    folders = [*(ROOT / "roles").iterdir(), *(ROOT / "docs" / "examples" / "roles").iterdir()]
    return [(f.name, p) for f in sorted(folders) if (f / "role.py").is_file() for p in sorted(f.rglob("*.py"))]


def test_no_role_imports_another_or_reads_the_plan_by_a_string():
    """mypy cannot see these: an import of another role is untyped to it (a role is loaded under
    a package of its own folder, gpunode.roles.module), and getattr(ctx.plan, "x", default) reads a
    name mypy never checks. The role machinery's own modules (context, venvs) are no role."""
    machinery = {m.stem for m in (ROOT / "src" / "gpunode" / "roles").glob("*.py")}
    found, files = [], _role_files()
    assert len({name for name, _ in files}) == 6  # the five shipped roles and the example
    for name, path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                parts = node.module.split(".")
                if parts[:2] == ["gpunode", "roles"] and len(parts) > 2 and parts[2] not in (*machinery, name) \
                        or parts[0] == "roles":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {node.module}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                    "getattr", "hasattr") and node.args and "plan" in ast.unparse(node.args[0]):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    assert not found, found


def _section() -> str:
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start:end if end > 0 else len(text)]


def _parts(cls: type, seen: dict[str, type]) -> dict[str, type]:
    """The dataclasses a role reaches from `cls` through its fields (the fixes' actions are
    gpunode.resolve.actions', documented there)."""
    for hint in typing.get_type_hints(cls).values():
        stack = [hint]
        while stack:
            t = stack.pop()
            stack.extend(typing.get_args(t))
            if (dataclasses.is_dataclass(t) and isinstance(t, type) and t.__module__ == plan_module.__name__
                    and t.__name__ not in seen):
                seen[t.__name__] = t
                _parts(t, seen)
    return seen


def test_the_doc_names_every_field_of_the_plan():
    rows = [line.split("|")[1] for line in _section().splitlines() if line.startswith("| `")]
    names = {re.sub(r"\(.*\)", "", n) for row in rows for n in re.findall(r"`([^`]+)`", row)}
    fields = {f.name for f in dataclasses.fields(Plan)}
    methods = {n for n, v in vars(Plan).items() if isinstance(v, types.FunctionType) and not n.startswith("_")}
    assert fields - names == set(), "fields of Plan without a line in docs/extending.md"
    assert names - fields - methods == set(), "lines for names Plan does not have"


def test_the_doc_lists_every_attribute_of_every_part():
    bullets = {}
    for item in re.split(r"\n(?=- `)", _section()):
        m = re.match(r"- `(\w+)`:", item)
        if m:
            bullets[m.group(1)] = set(re.findall(r"`(\w+)`", item))
    parts = _parts(Plan, {})
    assert set(bullets) == set(parts)
    for name, cls in parts.items():
        missing = {f.name for f in dataclasses.fields(cls)} - bullets[name]
        assert not missing, f"{name}: {sorted(missing)} not in docs/extending.md"
