"""A reader of unit and environment files that follows systemd's documented rules, for
the tests that parse rendered units back (systemd.syntax(7), systemd.service(5)
"Command lines", systemd.exec(5) EnvironmentFile=). The lab test
(tests/lab/test_unit_injection.py) checks the same files with systemd itself.
"""

from __future__ import annotations

import re

C_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\",
             '"': '"', "'": "'", "s": " "}


def settings(text: str) -> list[tuple[str, str, str]]:
    """(section, key, value) per setting: \\r ends a line too, a trailing backslash joins lines."""
    out: list[tuple[str, str, str]] = []
    section = ""
    pending = ""
    for raw in re.split(r"\r\n|\r|\n", text):
        line = pending + raw
        pending = ""
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.endswith("\\"):
            pending = stripped[:-1] + " "
            continue
        if stripped.startswith("["):
            section = stripped.strip("[]")
            continue
        key, sep, value = stripped.partition("=")
        assert sep, f"not a setting: {stripped!r}"
        out.append((section, key.strip(), value.strip()))
    return out


def specifiers(value: str) -> str:
    """%% is the only specifier gpunode writes; any other % would be expanded by systemd."""
    assert not re.search(r"%[^%]", value.replace("%%", "")), f"a live specifier in {value!r}"
    return value.replace("%%", "%")


def exec_words(value: str, command: bool = True, env: dict[str, str] | None = None) -> list[str]:
    """ExecStart= split the way systemd does: quotes, C escapes, \\; , $$ and %%; ${NAME} is
    the unit's environment (env), replaced whole. command=False: a list of words that is no
    command line (RequiresMountsFor=), where $ is plain."""
    words: list[str] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and value[i] in " \t":
            i += 1
        if i >= n:
            break
        word, quote, raw = "", "", i
        while i < n and (quote or value[i] not in " \t"):
            c = value[i]
            if c == "\\":
                nxt = value[i + 1]
                if nxt == "x":
                    word += chr(int(value[i + 2:i + 4], 16))
                    i += 4
                    continue
                if nxt == ";" and not quote:
                    word += ";"
                    i += 2
                    continue
                word += C_ESCAPES[nxt]
                i += 2
                continue
            if c in "\"'" and (not quote or quote == c):
                quote = "" if quote else c
                i += 1
                continue
            word += c
            i += 1
        assert not quote, f"unterminated quote in {value!r}"
        assert value[raw:i] != ";" or not command, f"a lone ; separates commands in {value!r}"
        word = specifiers(word)  # at load time; ${NAME} is expanded later, when the command runs
        if command:
            parts = re.split(r"(\$\$|\$\{[A-Za-z_][A-Za-z0-9_]*\})", word)
            for part in parts[::2]:
                assert "$" not in part, f"a live $ expansion in {word!r}"
            word = "".join("$" if p == "$$" else (env or {})[p[2:-1]] if p.startswith("${") else p
                           for p in parts)
        words.append(word)
    return words


def env_file(text: str) -> dict[str, str]:
    """EnvironmentFile= lines KEY="value": inside double quotes \\" \\\\ \\$ \\` stand for themselves."""
    out: dict[str, str] = {}
    for line in text.split("\n"):
        if not line.strip() or line.lstrip()[0] in "#;":
            continue
        m = re.fullmatch(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"', line)
        assert m, f"not one KEY=\"value\" line: {line!r}"
        out[m.group(1)] = re.sub(r'\\(["\\`$])', r"\1", m.group(2))
    return out
