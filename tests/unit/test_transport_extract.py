"""get_tree's extraction keeps a target's tar to plain data inside the destination, both with
tarfile's "data" filter and without it (Debian 12's Python 3.11.2 has none)."""

from __future__ import annotations

import io
import tarfile

import pytest

from gpunode.transport.base import extract_data


def tar_of(*members: tuple[tarfile.TarInfo, bytes]) -> io.BytesIO:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
    out.seek(0)
    return out


def info(name: str, kind: bytes = tarfile.REGTYPE, mode: int = 0o644, link: str = "") -> tarfile.TarInfo:
    i = tarfile.TarInfo(name)
    i.type, i.mode, i.linkname = kind, mode, link
    return i


@pytest.fixture(params=["filter", "no-filter"])
def extract(request, monkeypatch):
    if request.param == "no-filter":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)

    def run(buf: io.BytesIO, dest):
        with tarfile.open(fileobj=buf, mode="r|") as tar:
            extract_data(tar, dest)
    return run


def test_files_dirs_and_inner_links_arrive_without_setuid_or_group_write(extract, tmp_path):
    extract(tar_of((info("./d", tarfile.DIRTYPE, 0o755), b""), (info("./d/run", mode=0o4777), b"#!/bin/sh\n"),
                   (info("./link", tarfile.SYMTYPE, link="d/run"), b"")), tmp_path)
    assert (tmp_path / "d" / "run").read_bytes() == b"#!/bin/sh\n"
    assert (tmp_path / "d" / "run").stat().st_mode & 0o7777 == 0o755
    assert (tmp_path / "link").resolve() == (tmp_path / "d" / "run").resolve()


def test_an_absolute_name_lands_inside_the_folder(extract, tmp_path):
    extract(tar_of((info("/gpunode-escape-test"), b"x")), tmp_path)
    assert (tmp_path / "gpunode-escape-test").read_bytes() == b"x"


@pytest.mark.parametrize("bad", [info("../escape"),
                                 info("./out", tarfile.SYMTYPE, link="/etc/passwd"),
                                 info("./dev", tarfile.CHRTYPE)])
def test_a_member_that_would_leave_the_folder_or_is_a_device_is_refused(extract, tmp_path, bad):
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(tarfile.TarError):
        extract(tar_of((bad, b"x" if bad.isreg() else b"")), dest)
    assert not (tmp_path / "escape").exists() and not (dest / "out").is_symlink() and not (dest / "dev").exists()
