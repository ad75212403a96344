"""The reader of user-given text files: binary and non-UTF-8 files are refused by offset, text kept intact."""

from __future__ import annotations

import pytest

from gpunode.errors import FactError, InventoryError
from gpunode.userfiles import read_text


def test_a_binary_file_is_refused_with_the_offset_of_its_first_nul(tmp_path):
    f = tmp_path / "hosts.yml"
    f.write_bytes(b"hosts:\n  a:\x00\x01\x02")
    with pytest.raises(InventoryError, match=rf"{f}: inventory is binary \(a NUL byte at offset 11, line 2\)"):
        read_text(f, what="inventory")


def test_latin1_text_is_refused_with_byte_offset_and_line(tmp_path):
    f = tmp_path / "smi.txt"
    f.write_bytes("GPU 0\nCaf\u00e9\n".encode("latin-1"))
    with pytest.raises(FactError, match=r"not UTF-8 text \(byte 0xe9 at offset 9, line 2\)") as err:
        read_text(f, what="nvidia-smi output", error=FactError)
    assert "iconv" in err.value.hint


def test_a_folder_and_a_dangling_link_are_named(tmp_path):
    with pytest.raises(InventoryError, match="is a folder"):
        read_text(tmp_path)
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    with pytest.raises(InventoryError, match="symbolic link to a missing file"):
        read_text(tmp_path / "gone")
    # issue 41: a loop was called "a symbolic link to a missing file"
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(InventoryError, match="its symbolic links lead round in a loop"):
        read_text(tmp_path / "a")


def test_crlf_and_a_bom_read_as_plain_text_unless_exact(tmp_path):
    f = tmp_path / "a.txt"
    f.write_bytes(b"\xef\xbb\xbfone\r\ntwo\rthree\n")
    assert read_text(f) == "one\ntwo\nthree\n"
    assert read_text(f, exact=True) == "one\r\ntwo\rthree\n"
