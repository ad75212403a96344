"""docs/troubleshooting.md is compat/doctor.yml rendered: the committed file is never stale."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpunode.doctor import render
from gpunode.doctor.catalogue import PATH, load


def test_the_committed_troubleshooting_doc_matches_the_catalogue():
    assert render.DOC.read_text(encoding="utf-8") == render.render(), \
        "docs/troubleshooting.md is stale: run `python -m gpunode.doctor.render` and commit it"


def test_every_entry_is_in_the_doc_with_its_symptom_fix_and_sources():
    text = render.DOC.read_text(encoding="utf-8")
    for e in load():
        section = text.split(f'<a id="{e.id}"></a>', 1)[1].split("<a id=", 1)[0]
        assert f"## {e.title}" in section and e.symptom in section and e.fix in section
        assert all(f"<{s}>" in section for s in e.sources)


def test_a_change_in_the_yaml_makes_the_doc_stale(tmp_path, monkeypatch, capsys):
    data = yaml.safe_load(PATH.read_text(encoding="utf-8"))
    data["entries"][0]["fix"] = "a fix that the committed doc does not have"
    changed = tmp_path / "doctor.yml"
    changed.write_text(yaml.safe_dump(data), encoding="utf-8")
    text = render.render(load(changed))
    assert "a fix that the committed doc does not have" in text and text != render.render()
    doc = tmp_path / "troubleshooting.md"
    doc.write_text(text, encoding="utf-8")
    monkeypatch.setattr(render, "DOC", doc)
    assert render.main(["--check"]) == 1
    assert "is stale against compat/doctor.yml" in capsys.readouterr().err
    monkeypatch.setattr(render, "DOC", Path(render.__file__).resolve().parents[3] / "docs" / "troubleshooting.md")
    assert render.main(["--check"]) == 0
