"""`inv --list` and `inv --help TASK` are fast: the task tree imports no SSH, Proxmox API,
template or resolver code; each task imports what it runs when it runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# What a task body needs and --list/--help do not: SSH (paramiko, fabric), the Proxmox API client,
# templates, the terminal UI, and the resolver with its knowledge base.
HEAVY = ("paramiko", "fabric", "proxmoxer", "jinja2", "rich", "gpunode.resolve", "gpunode.transport.ssh",
         "gpunode.pipeline", "gpunode.roles")

PROBE = """
import json, sys
{before}
print(json.dumps(sorted(sys.modules)))
"""


def loaded(before: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE.format(before=before)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    *_, last = proc.stdout.strip().splitlines()
    return json.loads(last)


def heavy_in(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_importing_the_task_tree_loads_no_ssh_api_templates_or_resolver():
    modules = loaded("import gpunode.cli.main")
    assert "gpunode.cli.provision" in modules  # the tree itself is there
    assert heavy_in(modules) == []


def cli(*argv: str) -> tuple[str, list[str]]:
    """Run the CLI (as `gpunode ARGV`) in a fresh interpreter: its output, and the modules it loaded."""
    run = ("import contextlib, io\n"
           "from gpunode.cli.main import main\n"
           "out = io.StringIO()\n"
           "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
           f"    main(['gpunode', *{list(argv)!r}])\n"
           "print(json.dumps(out.getvalue()))\n")
    proc = subprocess.run([sys.executable, "-c", PROBE.format(before=run)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    *_, output, modules = proc.stdout.strip().splitlines()
    return json.loads(output), json.loads(modules)


def test_list_shows_every_task_with_its_docstring_without_them():
    listing, modules = cli("--list")
    assert "Provision inference servers" in listing
    assert "hostkeys.trust" in listing and "unlock" in listing
    assert "lab." not in listing  # the lab is test support: `inv lab.*` in a checkout, not the product's CLI
    assert heavy_in(modules) == []


def test_inv_in_a_checkout_has_the_labs_tasks():
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([str(Path(sys.executable).with_name("inv")), "--list"], cwd=root, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "lab.status" in proc.stdout and "provision" in proc.stdout


def test_help_of_a_task_shows_its_options_without_them():
    help_text, modules = cli("--help", "provision")
    assert "--check" in help_text and "show what would change and the diffs" in help_text
    assert heavy_in(modules) == []
