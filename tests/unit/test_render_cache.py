"""A template's rendering is kept under its text, its variables with their types and the rendering
code (steps/render.py, issue 45): a no-op re-run renders the same units without importing Jinja,
and whatever would render differently misses the entry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode.errors import StepError
from gpunode.steps import render
from gpunode.steps.unitfmt import unit_text


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def entries(cache) -> list[str]:
    return sorted(p.name for p in (cache / "gpunode/tables").glob("*.render.json"))


def test_a_second_process_renders_the_same_text_without_jinja(tmp_path, cache):
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "demo.conf.j2").write_text("port = {{ port }}\nname = {{ names | join(',') }}\n")
    code = ("import json, sys\n"
            "from pathlib import Path\n"
            "from gpunode.steps.render import render_from\n"
            "values = {'port': 8000, 'names': ['a', 'b']}\n"
            f"text, source = render_from('demo.conf.j2', values, root=Path({str(folder)!r}))\n"
            "print(json.dumps([text, source, 'jinja2' in sys.modules]))\n")
    env = {"XDG_CACHE_HOME": str(cache), "PATH": "/usr/bin:/bin"}
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                      check=True).stdout) for _ in range(2)]
    assert runs[0][:2] == runs[1][:2]
    assert runs[0][0].endswith("port = 8000\nname = a,b\n") and runs[0][1] == str(folder / "demo.conf.j2")
    assert (runs[0][2], runs[1][2]) == (True, False)  # rendered by Jinja once, then read back
    assert len(entries(cache)) == 1


def test_an_edited_template_or_other_values_render_again(tmp_path, cache):
    (tmp_path / "a.j2").write_text("x={{ x }}\n")
    assert render.render("a.j2", {"x": 1}, root=tmp_path, comment=None) == "x=1\n"
    assert render.render("a.j2", {"x": True}, root=tmp_path, comment=None) == "x=True\n"  # 1 and True: two entries
    (tmp_path / "a.j2").write_text("x = {{ x }}\n")
    assert render.render("a.j2", {"x": 1}, root=tmp_path, comment=None) == "x = 1\n"
    assert len(entries(cache)) == 3


def test_a_raw_string_is_refused_in_a_unit_even_after_the_escaped_one_was_kept(tmp_path, cache):
    (tmp_path / "demo.service.j2").write_text("[Unit]\nDescription={{ what }}\n")
    kept = render.render("demo.service.j2", {"what": unit_text("demo")}, root=tmp_path)
    assert kept.endswith("Description=demo\n") and len(entries(cache)) == 1
    with pytest.raises(StepError, match="raw value"):  # the same text, as a plain str: another key, checked
        render.render("demo.service.j2", {"what": "demo"}, root=tmp_path)


def test_the_shipped_units_of_a_cpu_plan_are_kept():
    # what the servers role hands its unit templates: escaped texts, command lines (ExecLine), numbers
    from gpunode.steps.unitfmt import exec_line

    values = {"what": unit_text("demo"), "exec_start": exec_line(["/bin/true", "a b"], "x"), "n": 2}
    assert render._cache_key("x.service.j2", ("/t",), (Path("/t/x.service.j2"), "ExecStart={{ exec_start }}"),
                             values) is not None


def test_a_template_that_pulls_in_another_or_an_odd_value_is_rendered_each_time(tmp_path, cache):
    (tmp_path / "part.j2").write_text("part {{ x }}\n")
    (tmp_path / "whole.j2").write_text("{% include 'part.j2' %}")
    assert render.render("whole.j2", {"x": 1}, root=tmp_path, comment=None) == "part 1\n"
    assert render.render("part.j2", {"x": object.__new__(_Odd)}, root=tmp_path, comment=None) == "part odd\n"
    assert entries(cache) == []


class _Odd:
    def __str__(self) -> str:
        return "odd"
