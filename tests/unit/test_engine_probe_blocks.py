"""engine.probe.blocks: plain string searches that find exactly what the per-run regex found."""

from __future__ import annotations

import random
import re

from gpunode.engine import probe

NONCE = "gpunode-0123456789abcdef"


def by_regex(output: str, nonce: str) -> list[tuple[int, str, int]]:
    pattern = re.compile(rf"^{nonce} begin (\d+)\n(.*?)\n{nonce} end \1 (\d+)\n", re.S | re.M)
    return [(int(m.group(1)), m.group(2), int(m.group(3))) for m in pattern.finditer(output)]


def test_tricky_outputs_give_what_the_regex_gives():
    n = NONCE
    cases = [
        f"{n} begin 0\n\n{n} end 0 0\n",                          # empty output
        f"{n} begin 0\n{n} end 0 0\n",                            # no newline of ours: not a block
        f"x{n} begin 0\nout\n{n} end 0 0\n",                      # begin not at a line start
        f"{n} begin 0\na\n{n} end 0 x\nb\n{n} end 0 3\n",         # an end line with a bad code is output
        f"{n} begin 1\na\n{n} end 2 0\n\n{n} end 1 0\n",          # another probe's end line is output
        f"{n} begin 0\na\n{n} end 0 0",                           # cut before the last newline
        f"{n} begin 0\nfake {n} begin 1\n\n{n} end 0 7\n{n} begin 1\nz\n{n} end 1 1\n",
        f"lock line\n{n} begin 12\n\u0663\n{n} end 12 0\n",
        f"{n} begin \u0663\n\n{n} end \u0663 0\n",                # \d is any decimal digit, as isdecimal()
        f"{n} begin \u00b2\n\n{n} end \u00b2 0\n",                # a superscript is not
    ]
    for text in cases:
        assert list(probe.blocks(text, n)) == by_regex(text, n), text


def test_random_outputs_give_what_the_regex_gives():
    rng = random.Random(7)
    pieces = [f"{NONCE} begin 0\n", f"{NONCE} begin 1\n", f"{NONCE} end 0 0\n", f"{NONCE} end 1 12\n",
              f"\n{NONCE} end 0 3\n", f"{NONCE} end 1 x\n", "out\n", "\n", "no newline", f"{NONCE} recorded x\n"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert list(probe.blocks(text, NONCE)) == by_regex(text, NONCE), text
