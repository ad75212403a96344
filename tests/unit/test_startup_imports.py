"""Each command imports what it needs (issue 45): an offline plan without the SSH stack, `status`'s
modules without the resolver, and a bound on how many modules a plan loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.unit.test_cli_import_light import cli

DATA = Path(__file__).resolve().parents[1] / "data"
ROOT = Path(__file__).resolve().parents[2]
SSH_STACK = ("paramiko", "fabric", "gpunode.transport.ssh")

#: Modules loaded by the offline `resolve` below, with the knowledge base read: 539 with the SSH
#: stack (before issue 45), 383 without it. Some room for growth, none for paramiko's ~150.
RESOLVE_MODULES = 420


def ssh_in(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == s or m.startswith(s + ".") for s in SSH_STACK)]


def test_an_offline_plan_loads_no_ssh_stack_and_stays_within_its_module_count():
    out, modules = cli("resolve", "--nvidia-smi", str(DATA / "nvidia-smi/h100-x8/nvidia-smi.txt"),
                       "--model", str(DATA / "models/gpt-oss-20b"))
    assert "Plan for nvidia-smi: sglang" in out and "pin set" in out  # the plan was made and printed
    assert ssh_in(modules) == []
    assert len(modules) <= RESOLVE_MODULES, f"{len(modules)} modules (bound {RESOLVE_MODULES})"


def test_help_and_list_load_no_ssh_stack():
    for argv in (("--help",), ("--list",), ("--help", "resolve"), ("--help", "status")):
        _, modules = cli(*argv)
        assert ssh_in(modules) == [], argv


def inv(*argv: str) -> tuple[int, list[str]]:
    """`inv ARGV` in the checkout, as a user types it there (tasks.py: the product's tree and the lab's
    tasks): its exit status, and the modules it had loaded when it exited."""
    probe = ("import atexit, json, sys\n"
             "atexit.register(lambda: print('MODULES ' + json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
             "from invoke.main import program\n"
             f"program.run(['inv', *{list(argv)!r}])\n")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    line = next((x for x in proc.stderr.splitlines() if x.startswith("MODULES ")), None)
    assert line is not None, proc.stderr[-2000:]
    return proc.returncode, json.loads(line.removeprefix("MODULES "))


def test_inv_in_a_checkout_loads_no_ssh_stack_for_an_offline_command():
    # the lab's tasks (gpunode_lab.tasks) come with every `inv`: they must not bring paramiko either
    for argv in (("--list",), ("--help", "resolve"),
                 ("resolve", "--nvidia-smi", str(DATA / "nvidia-smi/h100-x8/nvidia-smi.txt"),
                  "--model", str(DATA / "models/gpt-oss-20b"))):
        code, modules = inv(*argv)
        assert code == 0 and "gpunode_lab.tasks" in modules, argv
        assert ssh_in(modules) == [], argv


def test_the_ssh_transport_is_still_named_by_the_transport_package():
    from gpunode import transport
    from gpunode.transport import ssh

    assert transport.SshTransport is ssh.SshTransport and transport.SshSettings is ssh.SshSettings


def test_what_status_imports_loads_no_resolver_and_no_templates():
    # the modules `gpunode status` imports in its body (cli/fleet.py); the resolver, its knowledge
    # base and its YAML tables cost ~1 s and status makes no plan
    probe = ("import json, sys\n"
             "from gpunode.cli.session import Session\n"
             "from gpunode.fleet import gather, render, status\n"
             "from gpunode.steps.secretfiles import curl_auth\n"
             "from gpunode import variables\n"
             "variables.registry()\n"  # status checks the inventory's variables against every reader's
             "print(json.dumps(sorted(sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    modules = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "gpunode.fleet.status" in modules
    assert [m for m in modules if m == "gpunode.resolve" or m.startswith("gpunode.resolve.")] == []
    assert "jinja2" not in modules  # status renders no template


def test_the_whole_status_command_loads_no_resolver_and_no_templates(tmp_path):
    # the real task, to the round trip: a host whose port answers nothing, so status says UNREACHABLE
    # having imported all it needs. The resolver came in through fleet.endpoint (the client key's
    # name), which the list of status's imports above did not name (issue 45).
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    (tmp_path / "hosts.yml").write_text(f"hosts:\n  far:\n    address: 127.0.0.1\n    port: {port}\n"
                                        "    user: root\n    containers:\n      200: {}\n")
    out, modules = cli("status", "--host", "far", "--ct", "200", "--sample", "0", "-i", str(tmp_path))
    assert "far/200: UNREACHABLE" in out
    assert "gpunode.fleet.status" in modules and "paramiko" in modules  # it went as far as the trip
    assert [m for m in modules if m == "gpunode.resolve" or m.startswith("gpunode.resolve.")] == []
    assert "jinja2" not in modules


#: What the provision path imports, measured 2026-12-07 (docs/bench-results/startup.md): 648 modules
#: (647 at bf37745), 633 once rich.progress, uuid (platform) and importlib.resources' readers were left
#: out of it. A no-op re-run needs SSH, the resolver and every role; the bound catches a heavy import
#: added to that path (the wheel tooling, the judge, a UI library).
PROVISION_MODULES = 650
#: Loaded only where they are used, not by every provision: a progress bar (drawn on a terminal, when a
#: long step runs), uuid (its platform import), the package readers of importlib.resources (zipfile),
#: Jinja (a template whose rendering is kept is not rendered again: tests/unit/test_render_cache.py).
NOT_ON_THE_NO_OP = ("rich.progress", "uuid", "platform", "importlib.readers", "jinja2")


def test_the_provision_path_stays_within_its_module_count():
    # what `gpunode provision` imports in its body, then the SSH transport, the resolver and each
    # shipped role's module, as a run loads them before and after its one round trip
    probe = ("import importlib, json, sys\n"
             "from gpunode import pipeline, rollout, roles\n"
             "from gpunode.cli import provision\n"
             "from gpunode.cli.progress import Feed, LiveLines\n"
             "from gpunode.cli.session import Session\n"
             "from gpunode.engine.lock import Owner\n"
             "from gpunode.engine.runner import new_run_id\n"
             "from gpunode.fleet import provision as fleet\n"
             "from gpunode.report import HumanReport, JsonLines\n"
             "from gpunode.resolve import resolve\n"
             "from gpunode.transport import SshTransport\n"
             "for name in roles.order():\n"
             "    roles.module(name)\n"
             "print(json.dumps(sorted(sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    modules = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "paramiko" in modules and any(m.startswith("gpunode_role_") and m.endswith("_servers.role")
                                         for m in modules)  # the path was loaded
    assert not [m for m in modules
                if m.startswith(("gpunode.judge", "gpunode.knowledge.refresh", "gpunode.knowledge.wheelregistry"))]
    assert len(modules) <= PROVISION_MODULES, f"{len(modules)} modules (bound {PROVISION_MODULES})"
    assert [m for m in NOT_ON_THE_NO_OP if m in modules] == []
