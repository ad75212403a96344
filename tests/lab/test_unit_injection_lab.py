"""No inventory value can add a setting to a unit (issue 12, High), checked by systemd itself.

In a fresh cpu container of this module:
- `inv provision --check` with a model folder, a served model name and extra_args full of
  specials (`%`, `$`, quotes, `;`, a newline in extra_args) renders units; `systemd-analyze
  verify` finds nothing wrong in them, and systemd loads exactly the settings the template
  has. The boot-time staging unit, started for real, copies the model from and to those
  paths: the path arrives as data.
- With the issue's injection (`model_source` holding `\\n[Service]\\nExecStartPre=...`) the
  CLI refuses with exit 2, naming the variable, and nothing is written.
- A unit rendered by gpunode's template and quoting runs a process that reports its argv
  and environment: every special (newline, CR, tab, `%`, `$`, quotes, backslashes, `;`)
  arrives byte for byte.
"""

from __future__ import annotations

import base64
import re
import subprocess
from pathlib import Path

import pytest

from gpunode.steps.files import Template
from gpunode.steps.unitfmt import env_text, exec_line, unit_path, unit_seconds, unit_text
from tests.lab.provision_helpers import (
    INV,
    REPO,
    cpu_inventory,
    fresh_container,
    poll,
    provision,
    snapshot,
)
from tests.unit import systemd_parse

pytestmark = pytest.mark.lab

VMID = 241  # made and removed by this module
UNIT_DIR = "/etc/systemd/system"
MODEL = "/root/models/Q%h $HOME ${PATH} \"dq\" 'sq' ; x"  # the folder name is the served name too
EXTRA = ["--chat-template", "line one\nExecStartPre=/bin/touch /tmp/injected", "100%", "$$HOME", ";", "a\\"]
EXPECTED_ABSENT = ("is not executable", "No such file or directory", "has fatal error")


@pytest.fixture(scope="module")
def box(lab):
    with fresh_container(VMID, 2048, "lab-units", wheels=False) as b:
        b.sh('mkdir -p "$1" && cp -a /mnt/lab/models/tiny-qwen3/. "$1/"', MODEL)
        yield b


@pytest.fixture(scope="module")
def inventory(box, tmp_path_factory) -> Path:
    return cpu_inventory(tmp_path_factory.mktemp("inv") / "hosts.yml", VMID,
                         model_source=MODEL, weights_server_reserve_bytes=268435456, extra_args=EXTRA)


def created(diff: str) -> str:
    """The content of a file that a --check diff creates from nothing."""
    _, _, body = diff.partition("@@\n")
    return "".join(line[1:] for line in body.splitlines(keepends=True) if not line.startswith("\\ "))


def test_the_issues_injection_is_refused_by_the_cli_and_nothing_is_written(box, inventory):
    before = snapshot(box.sh)
    injected = 'model_source="/mnt/models/Q\\n[Service]\\nExecStartPre=/bin/touch /tmp/x\\n[Unit]\\n#"'
    proc = subprocess.run([str(INV), "provision", "-i", str(inventory), "--host", "lab", "--ct", str(VMID), "--check",
                           "--set", injected],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "variable model_source=" in proc.stderr and "(from --set)" in proc.stderr, proc.stderr
    assert "control characters \\n" in proc.stderr and "Traceback" not in proc.stderr
    assert snapshot(box.sh) == before


def test_units_rendered_from_specials_hold_only_their_settings_and_stage_the_model(box, inventory):
    run = provision(inventory, VMID, "--check")
    assert run.rc == 0, run.explain()
    files = {e["step"].split(":", 1)[1]: created(e["diff"]) for e in run.of("step")
             if e.get("diff") and e["step"].startswith("file:")}
    units = {Path(p).name: t for p, t in files.items() if p.startswith(f"{UNIT_DIR}/")}
    assert "gpunode-stage-weights.service" in units and "gpunode-cpu0.service" in units, sorted(files)

    # Parsed back by systemd's rules: the settings of the template, values as data.
    server = systemd_parse.settings(units["gpunode-cpu0.service"])
    assert [k for _, k, _ in server].count("ExecStartPre") == 0
    (start,) = [v for _, k, v in server if k == "ExecStart"]
    argv = systemd_parse.exec_words(start)
    assert argv[argv.index("--served-model-name") + 1] == Path(MODEL).name
    assert argv[-len(EXTRA):] == EXTRA

    scratch = box.sh("mktemp -d /tmp/gpunode-verify.XXXXXX").out.strip()
    try:
        for name, text in units.items():
            box.sh('cat > "$1/$2"', scratch, name, input=text)
        result = box.sh('cd "$1" && systemd-analyze verify ./*.service 2>&1', scratch, check=False)
    finally:
        box.sh('rm -rf -- "$1"', scratch)
    complaints = [line for line in result.out.splitlines()
                  if line.strip() and not any(word in line for word in EXPECTED_ABSENT)]
    assert complaints == [], "systemd-analyze verify:\n" + result.out

    # The staging unit for real: systemd runs it with the paths exactly as given.
    stage = "gpunode-stage-weights.service"
    script = files["/usr/local/lib/gpunode/stage-weights.sh"]
    box.sh('mkdir -p /usr/local/lib/gpunode && cat > /usr/local/lib/gpunode/stage-weights.sh', input=script)
    box.sh('cat > "/etc/systemd/system/$1" && systemctl daemon-reload', stage, input=units[stage])
    try:
        shown = box.sh('systemctl show -p RequiresMountsFor -p Description -- "$1"', stage).out
        mounts = next(line for line in shown.splitlines() if line.startswith("RequiresMountsFor="))
        shown_path = re.fullmatch(r'"((?:[^"\\]|\\.)*)"', mounts.partition("=")[2])
        assert shown_path, shown  # one path, which systemctl shows double-quoted with backslash escapes
        assert re.sub(r"\\(.)", r"\1", shown_path.group(1)) == MODEL, shown
        assert f"Description=gpunode: stage {MODEL} into /dev/shm/{Path(MODEL).name}" in shown, shown
        box.sh('systemctl start -- "$1"', stage, timeout=120)
        staged = f"/dev/shm/{Path(MODEL).name}"
        box.sh('cmp "$1/model.safetensors" "$2/model.safetensors" && cmp "$1/config.json" "$2/config.json" '
               '&& test -s "$2/.gpunode-manifest"', MODEL, staged)
    finally:
        box.sh('systemctl stop -- "$1"; rm -f "/etc/systemd/system/$1"; systemctl daemon-reload', stage, check=False)
    assert not box.exists("/tmp/injected") and not box.exists("/tmp/x")


REPORT = "/run/gpunode-argv"
# The container has no python: sh writes each argument, then the env values, NUL-terminated,
# whole into a temp file that it renames, so the test never reads half a report.
DUMP = (f'for a in "$@"; do printf "%s\\0" "$a"; done > {REPORT}.tmp; '
        f'printf "%s\\0" "$G1" "$G2" "$G3" >> {REPORT}.tmp; mv {REPORT}.tmp {REPORT}')
SPECIAL_ARGS = ["line\nExecStartPre=/bin/touch /tmp/x", "cr\rhere", "tab\there", "\x01", "100%h", "%%",
                "$HOME", "${PATH}", "$$", '"dq"', "'sq'", "back\\slash", "end\\", ";", "a b", ""]
SPECIAL_ENV = {"G1": "$HOME `id` \"q\" 'sq' \\ end\\", "G2": "100%h %%", "G3": "; ${PATH} #x"}


def test_a_unit_from_gpunode_s_template_passes_every_special_as_data(box):
    name = "gpunode-argvtest.service"
    env_file = "/etc/gpunode/argvtest.env"
    unit = Template(f"{UNIT_DIR}/{name}", template="servers/server.service.j2", vars={
        "engine": unit_text("test"), "name": unit_text("argvtest"), "device": unit_text("100% CPU"),
        "stage_unit": unit_text(""), "env_file": unit_path(env_file), "workdir": unit_path("/tmp"),
        "secrets_file": unit_text(""),
        "exec_start": exec_line(["/bin/sh", "-c", DUMP, "sh", *SPECIAL_ARGS]), "cpu_affinity": unit_text(""),
        "start_timeout": unit_seconds(60)})
    box.sh('mkdir -p /etc/gpunode && cat > "$1"', env_file, input=env_text(SPECIAL_ENV))
    box.sh('cat > "/etc/systemd/system/$1" && rm -f "$2" && systemctl daemon-reload', name, REPORT,
           input=unit.content)
    try:
        verify = box.sh('systemd-analyze verify "/etc/systemd/system/$1" 2>&1', name, check=False)
        assert [line for line in verify.out.splitlines() if line.strip()] == [], verify.out
        box.sh('systemctl start -- "$1"', name)
        report = poll("the unit's report", lambda: box.sh('base64 -w0 "$1"', REPORT, check=False).out or None, 30)
    finally:
        box.sh('systemctl stop -- "$1"; rm -f "/etc/systemd/system/$1" "$2"; systemctl daemon-reload', name,
               env_file, check=False)
    seen = base64.b64decode(report).decode().split("\0")[:-1]
    assert seen[:-3] == SPECIAL_ARGS
    assert dict(zip(("G1", "G2", "G3"), seen[-3:], strict=True)) == SPECIAL_ENV
    assert not box.exists("/tmp/x")
