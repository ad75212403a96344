"""The layer contract of tests/layers.py, held for the whole tree: every module in a layer, no import
circle, no import from a layer to one above it (function-local imports count). The layers are listed
there, top first, and drawn in docs/architecture.md; scripts/house prints the same figures."""

from __future__ import annotations

import subprocess
import sys

from tests import layers

FILES = layers.working_tree()
IMPORTS = layers.graph(FILES)


def test_every_module_has_a_layer():
    assert layers.unplaced(FILES) == []


def test_no_import_circle():
    assert layers.circles(IMPORTS) == []


def test_no_import_runs_back_up_the_layers():
    up = [f"{i.source} -> {i.target} (line {i.line})" for i in layers.back_up(IMPORTS)]
    assert up == [], "an import from a layer to one above it (tests/layers.py lists the layers)"


def test_the_check_sees_a_circle_opened_inside_a_function():
    files = {"src/gpunode/inventory/a.py": "def f():\n    from gpunode.inventory import b\n",
             "src/gpunode/inventory/b.py": "from . import a\n"}
    imports = layers.graph(files)
    assert layers.circles(imports) == [["gpunode.inventory.a", "gpunode.inventory.b"]]
    assert [i.local for i in sorted(imports, key=lambda i: i.source)] == [True, False]


def test_the_check_sees_an_import_back_up_and_not_one_only_a_type_checker_reads():
    files = {"src/gpunode/errors.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                      "    from gpunode.cli import main\n",
             "src/gpunode/resolve/x.py": "from gpunode.roles.context import RoleContext\n",
             "src/gpunode/roles/context.py": "", "src/gpunode/cli/main.py": "",
             "roles/servers/role.py": "from gpunode import pipeline\n", "src/gpunode/pipeline.py": ""}
    up = [(i.source, i.target) for i in layers.back_up(layers.graph(files))]
    assert up == [("gpunode.resolve.x", "gpunode.roles.context"), ("gpunode.roles.servers.role", "gpunode.pipeline")]


def test_scripts_house_prints_the_figures():
    out = subprocess.run([sys.executable, str(layers.ROOT / "scripts" / "house")], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert "import circles: 0\n" in out and "imports back up the layers: 0\n" in out
    assert "modules at src/gpunode/ (" in out and "modules in no layer" not in out
