"""Marker blocks found by string searches (gpunode/marked.py) are exactly what the per-run
regexes they replace found: the engine's batch, the facts' sections and the facts cache's region."""

from __future__ import annotations

import random
import re

import pytest

from gpunode.engine import probe
from gpunode.errors import FactError
from gpunode.facts import cache
from gpunode.facts.probe import split

NONCE = "gpunode-0123456789abcdef"
MARK = f"@@gpunode:{NONCE}:"


def batch_by_regex(output: str, nonce: str) -> list[tuple[int, str, int]]:
    pattern = re.compile(rf"^{nonce} begin (\d+)\n(.*?)\n{nonce} end \1 (\d+)\n", re.S | re.M)
    return [(int(m.group(1)), m.group(2), int(m.group(3))) for m in pattern.finditer(output)]


def sections_by_regex(output: str, nonce: str) -> dict[str, tuple[str, int]]:
    marker = re.escape(f"@@gpunode:{nonce}:")
    pattern = re.compile(rf"^{marker}section (?P<name>[a-z0-9_]+)\n(?P<body>.*?)\n{marker}rc (?P<rc>-?\d+)$",
                         re.MULTILINE | re.DOTALL)
    return {m["name"]: (m["body"], int(m["rc"])) for m in pattern.finditer(output)}


def region_by_regex(output: str, nonce: str) -> tuple[str, str, str] | None:
    marker = re.escape(f"@@gpunode:{nonce}:")
    m = re.search(rf"^{marker}cached\n(?P<body>.*?)\n{marker}cached-end (?P<rc>\d+)$", output, re.M | re.S)
    return (m["body"], m["rc"], output[:m.start()] + output[m.end():]) if m else None


def test_tricky_batches_give_what_the_regex_gives():
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
        assert list(probe.blocks(text, n)) == batch_by_regex(text, n), text


def test_random_batches_give_what_the_regex_gives():
    rng = random.Random(7)
    pieces = [f"{NONCE} begin 0\n", f"{NONCE} begin 1\n", f"{NONCE} end 0 0\n", f"{NONCE} end 1 12\n",
              f"\n{NONCE} end 0 3\n", f"{NONCE} end 1 x\n", "out\n", "\n", "no newline", f"{NONCE} recorded x\n"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert list(probe.blocks(text, NONCE)) == batch_by_regex(text, NONCE), text


def test_random_facts_outputs_give_what_the_regexes_give():
    rng = random.Random(11)
    pieces = [f"{MARK}section host\n", f"{MARK}section os_1\n", f"{MARK}section Bad\n", f"{MARK}section \n",
              f"{MARK}rc 0\n", f"{MARK}rc -2\n", f"{MARK}rc 1", f"{MARK}rc x\n", f"{MARK}rc --1\n",
              f"{MARK}cached\n", f"{MARK}cached-end 0\n", f"{MARK}cached-end 1", f"{MARK}cached-end -1\n",
              "line\n", "\n", "tail"]
    for _ in range(4000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        if f"{MARK}cached\n" not in text:
            got = {k: (v.output, v.rc) for k, v in split(text, NONCE).items()}
            assert got == sections_by_regex(text, NONCE), text
        expected = region_by_regex(text, NONCE)
        if expected is None:
            assert cache.stored(text, NONCE) == ({}, text), text
        elif expected[:2] == ("", "0"):
            assert cache.stored(text, NONCE) == ({}, expected[2]), text
        else:
            with pytest.raises(FactError) as caught:
                cache.stored(text, NONCE)
            assert caught.value.evidence == expected[0][-2000:], text


def test_the_recorded_digest_is_read_only_from_this_runs_own_whole_line():
    from gpunode.engine.recorded import recorded_digest

    digest = "a" * 64
    assert recorded_digest(f"facts\n{NONCE} recorded {digest}\n", NONCE) == digest
    assert recorded_digest(f"{NONCE} recorded {digest}", NONCE) == digest
    assert recorded_digest(f"gpunode-1 recorded {'b' * 64}\n{NONCE} recorded {digest}\n", NONCE) == digest
    assert recorded_digest(f"x{NONCE} recorded {digest}\n", NONCE) is None
    assert recorded_digest(f"{NONCE} recorded {digest}0\n", NONCE) is None
    assert recorded_digest(f"{NONCE} recorded {'A' * 64}\n", NONCE) is None
