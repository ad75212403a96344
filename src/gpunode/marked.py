"""Blocks of a probe's output between marker lines that carry the run's nonce.

Each block is an opening line, `OPENING KEY`, then the body, then a closing line,
`CLOSING(KEY) CODE`, the first one after the opening line whose code is well formed. That
is what a regex such as ^OPENING(KEY)\\n(.*?)\\nCLOSING(CODE)$ (multiline, dotall) finds;
the search here is plain `str.find`, because a regex with the nonce in it is compiled
anew on every run, and that cost more of a no-op's local CPU than the search itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Block:
    key: str
    body: str
    code: str
    start: int  # where the opening line starts
    stop: int  # just after the closing line's code (its newline, if any, follows)


def decimal(text: str) -> bool:
    """What the regex \\d+ matches as a whole."""
    return text.isdecimal()


def signed(text: str) -> bool:
    """What the regex -?\\d+ matches as a whole."""
    return text[1:].isdecimal() if text.startswith("-") else text.isdecimal()


def blocks(text: str, opening: str, closing: Callable[[str], str], *, key_ok: Callable[[str], bool],
           code_ok: Callable[[str], bool] = decimal, newline: bool = True) -> Iterator[Block]:
    """The blocks in `text`, in order, none overlapping. newline: the closing line must end with a
    newline (else the end of the text ends it too, as the regex's `$` allows)."""
    pos = 0
    while (start := text.find(opening, pos)) >= 0:
        pos = start + 1
        if start and text[start - 1] != "\n":
            continue
        eol = text.find("\n", start)
        key = text[start + len(opening):eol]
        if eol < 0 or not key_ok(key):
            continue
        close = "\n" + closing(key)
        at = eol
        while (at := text.find(close, at + 1)) >= 0:
            code_at = at + len(close)
            code_end = text.find("\n", code_at)
            if code_end < 0 and not newline:
                code_end = len(text)
            if code_end >= 0 and code_ok(text[code_at:code_end]):
                yield Block(key, text[eol + 1:at], text[code_at:code_end], start, code_end)
                pos = code_end
                break
