"""Names that differ only by characters that look alike: a Cyrillic 'р' for a Latin 'p', a fullwidth
'ｋ', a zero-width space pasted from a chat. "did you mean 'kpro6'?" under "unknown host 'kрro6'"
shows two names that look the same (issue 41); the hint here says which characters differ, by code
point, so the user sees why and what to retype.

The table holds the letters of Cyrillic and Greek that are drawn like Latin ones (after Unicode's
confusables.txt, the single-character entries whose target is ASCII); NFKC folds fullwidth and other
compatibility forms, and format characters (zero-width spaces, joiners, soft hyphens) are dropped.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

_PAIRS = {
    # Cyrillic small and capital letters drawn like Latin ones
    "а": "a", "в": "b", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h", "ӏ": "l", "ո": "n", "ս": "u", "ց": "g",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T",
    "Х": "X", "У": "Y", "І": "I", "Ј": "J", "Ѕ": "S", "Ԁ": "D", "Ԛ": "Q", "Ԝ": "W", "Һ": "h",
    # Greek
    "α": "a", "ο": "o", "ν": "v", "ρ": "p", "ι": "i", "κ": "k", "υ": "u", "ϲ": "c", "ϳ": "j",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O",
    "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # other scripts' digits and dashes
    "‐": "-", "‑": "-", "‒": "-", "–": "-", "−": "-", "٠": "0", "۰": "0",
}


def skeleton(text: str) -> str:
    """The text with look-alikes folded to the Latin letter they imitate and invisible characters dropped."""
    folded = unicodedata.normalize("NFKC", text)
    return "".join(_PAIRS.get(ch, ch) for ch in folded if unicodedata.category(ch) != "Cf")


def _odd(text: str) -> list[str]:
    return [f"{ch!r} ({unicodedata.name(ch, 'unnamed')}, U+{ord(ch):04X}) at character {i}"
            for i, ch in enumerate(text, 1) if not ch.isascii()]


def hint(name: object, known: Iterable[object]) -> str:
    """A hint naming the known name that `name` imitates, and the characters that differ; "" if none."""
    text = str(name)
    shape = skeleton(text)
    for other in map(str, known):
        if other == text or skeleton(other) != shape:
            continue
        mine, theirs = _odd(text), _odd(other)
        said = (f"{ascii(text)} holds {', '.join(mine[:3])}" if mine else "") + \
            ("; " if mine and theirs else "") + (f"the known {ascii(other)} holds {', '.join(theirs[:3])}"
                                                  if theirs else "")
        return (f"it looks like {other!r} but differs from it by look-alike characters ({said}); "
                f"type {ascii(other)} with the same characters as the inventory")
    return ""
