"""A user role from a folder outside the package, on container 200 through the real chain
(SSH -> pct stand-in -> LXC container with systemd): docs/examples' node_metrics, copied next
to a temporary inventory, with its templates on templates_path and one of them overridden by
the templates/ folder next to the inventory.

(1) --check names the template file each file and unit came from; the first run applies, the
    endpoint serves the override's text, and the second run changes nothing in one round trip;
(2) a connection cut while the changed unit is uploaded leaves no half-written file, and the
    re-run converges (the restart the cut run was notified of fires) with 0 changes after;
(3) teardown lists the unit and the folders the role names, and removing them leaves none.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from gpunode import roles, searchpath, variables
from gpunode.engine import DEFAULT_STATE_DIR, run_target
from gpunode.engine.lock import Owner
from gpunode.fleet import teardown
from gpunode.report import HumanReport
from gpunode.transport import SshTransport
from gpunode_lab import paths
from tests.lab.conftest import lab_settings
from tests.lab.cut_helpers import CutDuringUpload
from tests.lab.provision_helpers import cpu_inventory, fetch_inside, provision
from tests.unit.engine_helpers import Collect

pytestmark = pytest.mark.lab

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
VMID = paths.CT_CPU
UNIT = "gpunode-node-metrics.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT}"
OVERRIDE = '# our own metrics file\nsite_info{target="{{ target }}"} 1\n'


@pytest.fixture
def project(lab, ct, tmp_path):
    """The user's folders, outside the package; container 200 left as it was found."""
    shutil.copytree(EXAMPLES / "roles", tmp_path / "project" / "roles")
    shutil.copytree(EXAMPLES / "templates", tmp_path / "site-templates")
    (tmp_path / "project" / "templates" / "node_metrics").mkdir(parents=True)
    (tmp_path / "project" / "templates" / "node_metrics" / "metrics.j2").write_text(OVERRIDE)
    (tmp_path / "project" / "hosts.yml").write_text("hosts: {}\n")
    had_state = ct.run(["test", "-d", DEFAULT_STATE_DIR]).ok
    searchpath.use(tmp_path / "project" / "hosts.yml", templates_path=[str(tmp_path / "site-templates")])
    try:
        yield tmp_path
    finally:
        searchpath.use()
        ct.run(["sh", "-c", f"systemctl disable --now {UNIT}; rm -rf {UNIT_PATH} /etc/gpunode-node-metrics "
                "/var/lib/gpunode-node-metrics" + ("" if had_state else f" {DEFAULT_STATE_DIR}")
                + "; systemctl daemon-reload"])


def node_metrics(**changes) -> list:
    v = {**roles.defaults(), **changes}
    variables.check(v)
    names, _ = roles.select(None)
    assert names[-1] == "node_metrics"  # found on the search path, placed after the servers
    return roles.build(["node_metrics"], roles.RoleContext(target=f"lab/{VMID}", vars=v, facts=None, plan=None))


def served(target, port: int = 9109) -> str:
    return fetch_inside(target, f"http://127.0.0.1:{port}/metrics")


def test_check_apply_and_a_noop_in_one_round_trip(project, ct, host_transport):
    out = io.StringIO()
    report = HumanReport(Console(file=out, width=400, color_system=None))
    recap = run_target(ct, node_metrics(), check=True, emit=report)
    report.finish([recap])
    text = out.getvalue()
    assert recap.failed == 0 and recap.changed == 8  # 6 steps, daemon-reload and the restart
    override = (project / "project" / "templates" / "node_metrics" / "metrics.j2").resolve()
    unit_template = (project / "site-templates" / "node_metrics" / "gpunode-node-metrics.service.j2").resolve()
    assert "create /var/lib/gpunode-node-metrics/metrics" in text and f"(template {override})" in text
    assert f"(template {unit_template})" in text
    assert not ct.run(["test", "-e", UNIT_PATH]).ok, "check mode wrote the unit"

    first = Collect()
    recap = run_target(ct, node_metrics(), emit=first)
    assert recap.succeeded, recap.error or [e.reason for e in first.events if e.status == "failed"]
    assert served(ct) == f"# managed by gpunode (template node_metrics/metrics.j2); local changes will be " \
                         f"overwritten\n# our own metrics file\nsite_info{{target=\"lab/{VMID}\"}} 1\n\n"

    before = host_transport.commands_run
    again = run_target(ct, node_metrics())
    assert (again.changed, again.failed) == (0, 0) and again.ok == 6
    assert again.round_trips == 1 and host_transport.commands_run - before == 1


def test_a_cut_mid_run_converges_and_teardown_removes_what_the_role_made(project, ct):
    assert run_target(ct, node_metrics()).succeeded
    (project / "site-templates" / "node_metrics" / "gpunode-node-metrics.service.j2").write_text(
        (EXAMPLES / "templates" / "node_metrics" / "gpunode-node-metrics.service.j2").read_text()
        .replace("RestartSec=2", "RestartSec=3"))
    host = SshTransport(lab_settings(name="lab-user-role"))
    try:
        cutting = CutDuringUpload(host, VMID, UNIT_PATH)
        cut = Collect()
        recap = run_target(cutting, node_metrics(node_metrics_port=9110), emit=cut)
    finally:
        host.close()
    assert cutting.cut and not recap.succeeded
    assert [e.step for e in cut.events if e.status == "failed"] == [f"unit:{UNIT}"]
    listing = ct.run(["sh", "-c", f"ls -a /etc/systemd/system; grep -c RestartSec=3 {UNIT_PATH}; true"]).stdout
    assert ".gpunode." not in listing and "\n1\n" not in listing  # the old unit, no half or temp file

    second = Collect()
    recap = run_target(ct, node_metrics(node_metrics_port=9110), emit=second, lock_wait=20)
    assert recap.succeeded, recap.error
    statuses = dict((e.step, e.status) for e in second.events)
    assert statuses[f"unit:{UNIT}"] == "changed" and statuses[f"restart:{UNIT}"] == "changed"
    assert "site_info" in served(ct, 9110)
    third = run_target(ct, node_metrics(node_metrics_port=9110))
    assert (third.changed, third.failed, third.round_trips) == (0, 0, 1)

    v = {**roles.defaults(), "node_metrics_port": 9110}
    listed = teardown.plan(ct, "/dev/shm", DEFAULT_STATE_DIR, False, extra=roles.removals(v))
    mine = ["/etc/gpunode-node-metrics", "/var/lib/gpunode-node-metrics"]
    assert UNIT_PATH in listed.units and set(mine) <= {p for _, p in listed.paths}
    # only the role's part is removed: README's first command may have provisioned this container too
    removal = teardown.Removal(listed.target, units=[UNIT_PATH], paths=[r for r in listed.paths if r[1] in mine])
    assert teardown.apply(ct, removal, Owner.current("run-user-role"), DEFAULT_STATE_DIR, False) == []
    left = ct.run(["sh", "-c", f"ls -d {UNIT_PATH} /etc/gpunode-node-metrics /var/lib/gpunode-node-metrics 2>&1; "
                   f"systemctl show -p LoadState --value {UNIT}"]).stdout
    assert left.count("No such file or directory") == 3 and left.rstrip().endswith("not-found")


SITE_SERVERS = '''"""A site's own servers role: one file, nothing of the shipped role's."""
from gpunode.engine import RolePlan
from gpunode.steps.files import File


def build(ctx):
    return [RolePlan("servers", [File(path="/etc/gpunode-site-servers/note", content=ctx.vars["site_note"] + "\\n")])]
'''


def test_a_user_role_named_servers_replaces_the_shipped_one_wholly(lab, ct, tmp_path):
    """`inv provision --check` with a roles/servers/ next to the inventory: the site's role runs where
    the shipped one did, with its own variables, and nothing of the shipped one (no units, services,
    readiness, nor its variables) is left."""
    site = tmp_path / "site"
    (site / "roles" / "servers").mkdir(parents=True)
    (site / "roles" / "servers" / "role.py").write_text(SITE_SERVERS)
    (site / "roles" / "servers" / "defaults.yml").write_text("# what the note says\nsite_note: hello\n")
    (site / "roles" / "servers" / "types.yml").write_text("site_note: text\n")
    inventory = cpu_inventory(site / "hosts.yml", VMID)

    run = provision(inventory, VMID, "--check", "--set", "site_note=from the site", timeout=300)
    assert run.rc == 0, run.explain()
    steps = [(e["role"], e["step"]) for e in run.events if e.get("type") == "step"]
    assert [r for r, _ in steps if r not in ("base", "engine", "cuda_fixes", "weights")] == ["servers"], steps
    assert steps[-1] == ("servers", "file:/etc/gpunode-site-servers/note"), steps
    assert not [s for _, s in steps if s.startswith(("unit:", "service:", "ready"))], steps
    assert "from the site" in run.event("file:/etc/gpunode-site-servers/note").get("diff", ""), run.explain()

    # the shipped role's variables went with it: one of them is now a name no role reads
    refused = provision(inventory, VMID, "--check", "--set", "servers_start_timeout=60", timeout=120)
    assert refused.rc == 2 and "servers_start_timeout" in refused.stderr and "not one gpunode knows" in \
        refused.stderr, refused.explain()
