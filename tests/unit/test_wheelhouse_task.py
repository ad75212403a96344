import pytest

from gpunode.errors import InventoryError
from gpunode.resolve import load_kb
from gpunode.wheelhouse import pinset_download, platforms


def test_every_pinset_has_a_download_with_its_pins_and_the_router():
    kb = load_kb()
    for p in kb.pinsets:
        d = pinset_download(p.id, python=p.python_min, kb=kb)
        for pkg in p.packages:
            assert pkg.req in d.requirements
        assert "sglang-router==0.3.2" in d.requirements
        argv = d.argv("/srv/wheels")
        assert argv[:4] == ["python3", "-m", "pip", "download"] and argv[-len(d.unlocked()):] == list(d.unlocked())
        for url in {kb.indexes[x.index].url for x in p.packages} - {"https://pypi.org/simple"}:
            assert url in d.extra_index_urls


def test_cuda13_sets_bring_the_pip_nvcc_pinned_to_the_runtime():
    d = pinset_download("cu13-a", python="3.11")
    assert "nvidia-cuda-nvcc==13.0.88" in d.requirements


def test_platform_tags_cover_older_glibc_builds():
    tags = platforms("2.36", "x86_64")
    assert tags[0] == "manylinux_2_36_x86_64" and "manylinux_2_28_x86_64" in tags and "manylinux2014_x86_64" in tags


def test_unknown_pinset_lists_the_known_ones():
    with pytest.raises(InventoryError, match="unknown pin set 'cu99'") as err:
        pinset_download("cu99", python="3.11")
    assert "cu13-a" in err.value.hint


def test_a_locked_pinset_downloads_the_lock_by_hash_and_the_rest_by_name():
    d = pinset_download("cu13-latest", python="3.12", glibc="2.36", extra=("uv==0.9.0",))
    assert d.lock == "cu13-latest/pylock.x86_64-py312.toml" and len(d.locked) > 150
    assert any(line.startswith("torch==2.14.1 --hash=sha256:") for line in d.locked)
    assert d.unlocked() == ("sglang-router==0.3.2", "uv==0.9.0")
    assert d.locked_argv("/w", "/w/l.txt")[-4:] == ["--no-deps", "--require-hashes", "-r", "/w/l.txt"]
    assert pinset_download("cu12-legacy", python="3.11").locked == ()  # UNLOCKED.md: its torch is not on PyPI
