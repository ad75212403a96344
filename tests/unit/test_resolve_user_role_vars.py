"""`inv resolve` takes a user role's variables as `inv provision` does (issue 41: --set of a variable a
role beside the inventory declares was refused as unknown, because the variables were checked before
the inventory's roles were on the search path). Run as a user would, through the console entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.resolve_facts import DATA
from tests.unit.test_role_search_path import user_role

REPO = Path(__file__).resolve().parents[2]
SNAP = str(DATA / "snapshots" / "h200")


def gpunode(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    code = "import sys; from gpunode.cli.main import main; sys.argv[0] = 'gpunode'; main()"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUNODE_")}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                          env={**env, "HOME": str(cwd), "PYTHONPATH": str(REPO)})


@pytest.fixture
def site(tmp_path: Path) -> Path:
    user_role(tmp_path / "site" / "roles", "exporter")  # declares exporter_dir: path
    (tmp_path / "site" / "hosts.yml").write_text("hosts:\n  h1:\n    address: 127.0.0.1\n    port: 1\n")
    return tmp_path / "site"


@pytest.mark.parametrize("where", [["--host", "h1"], []], ids=["a host of the inventory", "a snapshot alone"])
def test_a_user_roles_variable_given_with_set_is_taken(site, where):
    out = gpunode("resolve", "-i", str(site), *where, "--facts", SNAP, "--set", "exporter_dir=/srv/exporter",
                  "--set", "model_path=/dev/shm/m", "--set", "tp=1", "--json", cwd=site.parent)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["servers"]


def test_a_misspelled_one_is_still_refused_with_the_user_roles_name(site):
    out = gpunode("resolve", "-i", str(site), "--facts", SNAP, "--set", "exporter_dri=/srv/exporter", cwd=site.parent)
    assert out.returncode == 2
    assert "variable exporter_dri (from --set) is not one gpunode knows" in out.stderr
    assert "did you mean exporter_dir?" in out.stderr
