"""The derived tables' parsed forms are kept under the user's cache dir (gpunode.datacache, issue 45):
sglang-choices.yml one pin set at a time, sglang-registry.yml whole. A cached value is what the parse
gives, an edited file is parsed again, and a broken entry or a cache dir that cannot be written never
changes what is read."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from gpunode import datacache, yamlsrc
from gpunode.resolve.derived import PinsetPicks
from gpunode.resolve.load import COMPAT, DERIVED, REGISTRY, _registry


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "gpunode" / "tables"


def no_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: PinsetPicks, start: int, end: int) -> None:
        raise AssertionError(f"parsed lines {start}-{end} of {self.path}")

    monkeypatch.setattr(PinsetPicks, "_parse", refuse)


def test_a_cached_part_equals_the_parse_and_is_read_without_yaml(cache: Path, monkeypatch: pytest.MonkeyPatch):
    parsed = PinsetPicks(COMPAT / DERIVED)
    first = {pid: parsed[pid] for pid in parsed}
    assert len(list(cache.glob("*.json"))) == len(first) >= 5
    no_parse(monkeypatch)
    again = PinsetPicks(COMPAT / DERIVED)  # as the next process reads it
    assert {pid: again[pid] for pid in again} == first


def test_an_edited_file_is_parsed_again(cache: Path, tmp_path: Path):
    path = tmp_path / "sglang-choices.yml"
    shutil.copy(COMPAT / DERIVED, path)
    before = PinsetPicks(path)
    pid = next(iter(before))
    arch, ccs = next((a, c) for a, c in before[pid].items() if any("attention_backend" in v for v in c.values()))
    cc = next(cc for cc, v in ccs.items() if "attention_backend" in v)
    old = ccs[cc]["attention_backend"]
    lines = path.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line == f"      {arch}:\n")
    at = next(i for i in range(at, len(lines)) if lines[i].strip() in (f"'{cc}':", f"{cc}:"))
    at = next(i for i in range(at, len(lines)) if lines[i].strip().startswith("attention_backend:"))
    lines[at] = lines[at].replace(f"attention_backend: {old}", "attention_backend: edited-by-hand")
    path.write_text("".join(lines))
    after = PinsetPicks(path)
    assert after[pid][arch][cc]["attention_backend"] == "edited-by-hand"
    assert len(list(cache.glob(f"*.{pid}.json"))) == 2  # the old file's entry stays for a checkout that has it


BROKEN = {
    "half-written": lambda key, pid: "{",
    "not a mapping": lambda key, pid: "[]",
    "another file's": lambda key, pid: json.dumps({"key": "0" * 64, "name": pid, "value": {}}),
    "another pin set's": lambda key, pid: json.dumps({"key": key, "name": "other", "value": {}}),
    "its own key, no mapping": lambda key, pid: json.dumps({"key": key, "name": pid, "value": []}),
}


@pytest.mark.parametrize("broken", BROKEN.values(), ids=BROKEN.keys())
def test_a_broken_or_foreign_entry_is_ignored(cache: Path, broken):
    direct = PinsetPicks(COMPAT / DERIVED)
    pid = next(iter(direct))
    expected = direct[pid]
    (file,) = cache.glob(f"*.{pid}.json")
    file.write_text(broken(json.loads(file.read_text())["key"], pid))
    assert PinsetPicks(COMPAT / DERIVED)[pid] == expected


def test_a_cache_dir_that_cannot_be_written_costs_only_the_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "cache").write_text("a file where the cache dir would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    picks = PinsetPicks(COMPAT / DERIVED)
    assert {pid: picks[pid] for pid in picks} == {pid: PinsetPicks(COMPAT / DERIVED)[pid] for pid in picks}
    assert datacache.folder().parent.parent.is_file()


def test_the_registry_is_read_from_its_entry_once_parsed(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    parsed = _registry(COMPAT / REGISTRY)
    assert parsed and len(list(cache.glob("*.sglang-registry.json"))) == 1

    def refuse(text: str) -> None:
        raise AssertionError("parsed the registry's YAML")

    with monkeypatch.context() as m:
        m.setattr(yamlsrc, "table", refuse)
        assert _registry(COMPAT / REGISTRY) == parsed
    edited = tmp_path / "sglang-registry.yml"
    edited.write_text((COMPAT / REGISTRY).read_text() + "added_by_hand: 1\n")
    assert _registry(edited) == {**parsed, "added_by_hand": 1}


def test_values_json_would_change_are_not_kept(cache: Path):
    import datetime

    datacache.put("k", "dates", {"when": datetime.date(2026, 12, 7)})
    datacache.put("k", "int keys", {1: "one"})
    datacache.put("k", "plain", {"a": [1, 2.5, None, True]})
    assert sorted(p.name for p in cache.glob("*.json")) == ["k.plain.json"]
    assert datacache.get("k", "plain") == {"a": [1, 2.5, None, True]} and datacache.get("k", "dates") is None


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="chown needs root")
def test_an_entry_another_user_owns_is_ignored(cache: Path):
    datacache.put("k", "theirs", {"a": 1})
    os.chown(cache / "k.theirs.json", 65534, 65534)
    assert datacache.get("k", "theirs") is None


def test_a_new_entry_removes_the_same_tables_stale_ones(cache: Path):
    datacache.put("old", "t", {"v": 1})
    datacache.put("recent", "t", {"v": 2})
    datacache.put("old", "x.t", {"v": 3})  # another table whose name ends alike
    day_ago = time.time() - datacache.STALE_S - 60
    for name in ("old.t.json", "old.x.t.json"):
        os.utime(cache / name, (day_ago, day_ago))
    datacache.put("new", "t", {"v": 4})
    assert sorted(p.name for p in cache.glob("*.json")) == ["new.t.json", "old.x.t.json", "recent.t.json"]
