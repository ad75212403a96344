"""read_held: a held process's first line and body, whatever sizes its output arrives in."""

import pytest

from gpunode.transport.base import read_held

END = "gpunode-end-5f3c"
OUT = b"LOCKED\nline one\n\nline three, then the end\n" + END.encode() + b"\n"


def chunks(data: bytes, size: int):
    parts = [data[i:i + size] for i in range(0, len(data), size)]

    def read(_n: int) -> bytes:
        return parts.pop(0) if parts else b""
    return read


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16, len(END) + 1, 1 << 20])
def test_the_body_ends_at_the_end_line_in_any_chunking(size):
    assert read_held(chunks(OUT, size), END) == ("LOCKED", "line one\n\nline three, then the end\n")


@pytest.mark.parametrize("size", [1, 5, 1 << 20])
def test_an_end_line_right_after_the_first_line_gives_an_empty_body(size):
    assert read_held(chunks(b"FREE\n" + END.encode() + b"\n", size), END) == ("FREE", "")


def test_the_end_word_inside_a_line_does_not_end_the_body():
    out = f"LOCKED\nsays {END}\n{END}x\n{END}\n".encode()
    assert read_held(chunks(out, 4), END) == ("LOCKED", f"says {END}\n{END}x\n")


def test_output_that_stops_before_the_end_line_is_all_body():
    assert read_held(chunks(b"LOCKED\ncut sh", 3), END) == ("LOCKED", "cut sh")
    assert read_held(chunks(b"BUSY 12 {}", 3), END) == ("BUSY 12 {}", "")
    assert read_held(chunks(b"", 3), END) == ("", "")


def test_without_an_end_line_only_the_first_line_is_read():
    read = chunks(b"LOCKED\n", 1)
    assert read_held(read, "") == ("LOCKED", "")
