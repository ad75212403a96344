"""A user's unit template that systemd would read otherwise than the role wrote it is refused at
plan time, before any file is written (issue 41). systemd skips a line without `=` (or with a
key it does not know) with a journal warning, and `systemd-analyze verify` passes such a unit:
`{% filter wordwrap(60) %}ExecStart=...` loaded, started the first line's words alone and both
servers crash-looped. The facts are the recorded debian12-cpu snapshot (see its README)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from gpunode import pipeline, roles, searchpath
from gpunode.errors import StepError
from gpunode.inventory import Host, Target
from gpunode.transport import LocalTransport
from tests.unit import systemd_parse

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "tests" / "data" / "snapshots" / "debian12-cpu"
SHIPPED = (ROOT / "templates" / "servers" / "server.service.j2").read_text()
EXEC = "ExecStart={{ exec_start }}\n"


def units(tmp_path: Path, template: str) -> dict[str, str]:
    folder = tmp_path / "templates" / "servers"
    folder.mkdir(parents=True)
    (folder / "server.service.j2").write_text(template)
    searchpath.use(templates_path=[str(tmp_path / "templates")])
    try:
        v = {**roles.defaults(), "model_source": "/mnt/models/tiny-qwen3", "engine": "vllm-cpu"}
        target = Target(Host(name="local", address="127.0.0.1", connection="local"), None, v, {})
        job = pipeline.prepare(target, LocalTransport(), facts_dir=SNAPSHOT)
    finally:
        searchpath.use()
    return {s.path: s.content for p in job.roles for s in p.steps
            if str(getattr(s, "path", "")).endswith(".service")}


@pytest.mark.parametrize("change", [EXEC, "{% filter replace(' --', ' \\\n    --') %}" + EXEC + "{% endfilter %}"],
                         ids=["as-shipped", "continued-lines"])
def test_a_user_copy_that_keeps_the_command_line_passes(tmp_path, change):
    got = units(tmp_path, SHIPPED.replace(EXEC, change))
    text = got["/etc/systemd/system/gpunode-cpu0.service"]
    starts = [v for _, k, v in systemd_parse.settings(text) if k == "ExecStart"]
    assert len(starts) == 1 and "--port" in starts[0]


@pytest.mark.parametrize(("name", "change", "said"), [
    ("wordwrap", "{% filter wordwrap(60) %}" + EXEC.strip() + "{% endfilter %}\n", "is not a `Key=value` setting"),
    ("upper", "{% filter upper %}" + EXEC + "{% endfilter %}", "does not come back whole"),
    ("commented-out", "#ExecStart={{ exec_start }}\nExecStart=/bin/true\n", "does not come back whole"),
])
def test_a_unit_whose_command_line_systemd_would_not_read_whole_is_refused(tmp_path, name, change, said):
    template = tmp_path / "templates" / "servers" / "server.service.j2"
    with pytest.raises(StepError, match=said) as err:
        units(tmp_path, SHIPPED.replace(EXEC, change))
    assert str(template) in str(err.value), err.value


@pytest.mark.parametrize(("make", "said"), [(lambda p: os.mkfifo(p), "template is a named pipe (FIFO)"),
                                            (lambda p: p.write_bytes(b"ok\x00\x01"), "template is binary")])
def test_a_template_file_goes_through_the_reader_of_user_files(tmp_path, make, said):
    """issue 41: a FIFO template hung Jinja's read."""
    from gpunode.steps.render import render_from

    make(tmp_path / "odd.conf.j2")
    with pytest.raises(StepError, match=re.escape(said)):
        render_from("odd.conf.j2", {}, root=tmp_path)


def test_an_undefined_variable_is_named_with_the_templates_line(tmp_path):
    """issue 41: "'dict object' has no attribute 'b'" said neither where nor which."""
    from gpunode.steps.render import render_from

    (tmp_path / "site.conf.j2").write_text("first = 1\n\nsecond = {{ labels.rack }}\n")
    with pytest.raises(StepError, match=r"template site.conf.j2 line 3 uses a variable that is not set: "
                       r"'dict object' has no attribute 'rack'"):
        render_from("site.conf.j2", {"labels": {}}, root=tmp_path)
