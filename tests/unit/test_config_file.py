"""Settings from config files, layered: user file < project gpunode.yaml < environment < flags."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode import settings
from gpunode.errors import InventoryError

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "data" / "snapshots" / "h200"  # recorded: see its README.md
ENV = ("GPUNODE_INVENTORY", "GPUNODE_FORKS", "GPUNODE_KNOWN_HOSTS", "GPUNODE_CONFIG", "NO_COLOR", "FORCE_COLOR")


def inventory(folder: Path, host: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hosts.yml").write_text(f"hosts:\n  {host}:\n    address: 127.0.0.1\n    port: 1\n"
                                      "vars: {model_source: /mnt/models/m, tp: 1}\n")
    return folder


@pytest.fixture
def home(tmp_path, monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / "xdg" / "gpunode").mkdir(parents=True)
    (tmp_path / "project" / "deep" / "below").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "project" / "deep" / "below")
    return tmp_path


def planned(capsys, *argv: str) -> tuple[list[str], str]:
    """provision --facts: which target the inventory in force names (nothing is listening: exit 2)."""
    from gpunode.cli.main import main

    with contextlib.suppress(SystemExit):
        main(["gpunode", "provision", "-l", "all", "--facts", str(H200), "-j", *argv])
    out = capsys.readouterr()
    return [json.loads(line)["target"] for line in out.out.splitlines() if '"type":"plan"' in line], out.err


def test_each_layer_beats_the_one_before(home, capsys, monkeypatch):
    inventory(home / "xdg" / "gpunode" / "inv", "from_user")
    inventory(home / "project" / "inv", "from_project")
    inventory(home / "env-inv", "from_env")
    inventory(home / "flag-inv", "from_flag")
    (home / "xdg" / "gpunode" / "config.yaml").write_text("inventory: inv\nforks: 3\n")  # relative to its folder
    assert planned(capsys)[0] == ["from_user"]
    (home / "project" / "gpunode.yaml").write_text("inventory: inv\n")  # found from a folder two levels below
    assert planned(capsys)[0] == ["from_project"]
    assert settings.current().forks == 3                                 # what the project file leaves alone
    monkeypatch.setenv("GPUNODE_INVENTORY", str(home / "env-inv"))
    assert planned(capsys)[0] == ["from_env"]
    assert planned(capsys, "-i", str(home / "flag-inv"))[0] == ["from_flag"]


def test_gpunode_config_names_the_project_file(home, capsys, monkeypatch):
    inventory(home / "elsewhere" / "inv", "named")
    (home / "elsewhere" / "fleet.yaml").write_text("inventory: inv\nforks: 12\n")
    (home / "project" / "gpunode.yaml").write_text("inventory: nothing-here\n")
    monkeypatch.setenv("GPUNODE_CONFIG", str(home / "elsewhere" / "fleet.yaml"))
    assert planned(capsys)[0] == ["named"]
    assert settings.current().forks == 12
    monkeypatch.setenv("GPUNODE_FORKS", "5")
    assert settings.current().forks == 5


@pytest.mark.parametrize("text,message", [
    ("inventroy: inv\n", "gpunode.yaml:1: unknown setting 'inventroy'"),
    ("forks: 0\n", "gpunode.yaml:1: forks must be a whole number from 1 to 256, got '0'"),
    ("forks: yes\n", "forks must be a whole number"),
    ("colour: blue\n", "gpunode.yaml:1: colour must be auto, always or never"),
    ("- inventory\n", "gpunode.yaml: a gpunode config file is a mapping"),
    ("inventory: nowhere\n", "inventory {d}/project/nowhere (from {d}/project/gpunode.yaml:1) does not exist"),
])
def test_a_bad_setting_is_named_with_its_file_and_line(text, message, home, capsys):
    (home / "project" / "gpunode.yaml").write_text(text)
    targets, err = planned(capsys)
    assert targets == [] and message.replace("{d}", str(home)) in err, err


def test_a_bad_forks_in_the_environment_names_the_variable(home, monkeypatch):
    monkeypatch.setenv("GPUNODE_FORKS", "lots")
    with pytest.raises(InventoryError, match="GPUNODE_FORKS: forks must be a whole number"):
        settings.current()


def test_known_hosts_from_the_project_file(home, monkeypatch):
    from gpunode.transport.hostkeys import default_known_hosts

    assert default_known_hosts() == home / "xdg" / "gpunode" / "known_hosts"
    (home / "project" / "gpunode.yaml").write_text("known_hosts: keys/known_hosts\n")
    assert default_known_hosts() == home / "project" / "keys" / "known_hosts"


@pytest.mark.parametrize("setting,env,coloured", [
    ("colour: always\n", {}, True),
    ("colour: never\n", {"FORCE_COLOR": "1"}, True),   # the environment beats the file
    ("colour: always\n", {"NO_COLOR": "1"}, False),
    ("color: never\n", {}, False),
])
def test_colour_setting_reaches_the_terminal_output(setting, env, coloured, home):
    inventory(home / "project" / "inv", "box")
    (home / "project" / "gpunode.yaml").write_text("inventory: inv\n" + setting)
    base = {k: v for k, v in os.environ.items() if k not in ENV and k != "GPUNODE_DEBUG"}
    proc = subprocess.run([sys.executable, "-c", "from gpunode.cli.main import main; main()", "provision", "-l",
                           "all", "--facts", str(H200)], capture_output=True, text=True, timeout=120,
                          env={**base, **env, "XDG_CONFIG_HOME": str(home / "xdg")}, cwd=home / "project")
    assert "box" in proc.stdout, proc.stderr
    assert ("\x1b[" in proc.stdout) is coloured
