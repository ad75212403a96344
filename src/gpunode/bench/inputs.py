"""What the user hands `inv bench`: a prompt JSONL, a job JSONL, concurrency lists. Bad input
is a BenchInputError naming the file, line and key, and what to write instead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpunode.errors import GpunodeError

MAX_PROMPT_BYTES = 64 << 20  # the prompts travel to the target on stdin; a job file is not a prompt set


class BenchInputError(GpunodeError):
    """A benchmark option or file is not usable as given."""


def concurrencies(text: str | int) -> list[int]:
    """--concurrency 16 or 1,4,16,64 -> [1, 4, 16, 64] (sorted, no repeats)."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts or not all(p.isascii() and p.isdigit() and 1 <= int(p) <= 4096 for p in parts):
        raise BenchInputError(f"--concurrency {str(text)[:40]!r} is not a list of whole numbers from 1 to 4096",
                              hint="e.g. --concurrency 16, or --concurrency 1,4,16,64 for a sweep")
    return sorted({int(p) for p in parts})


def _lines(path: Path, what: str):
    if not path.is_file():
        raise BenchInputError(f"{what} {path} does not exist or is not a file",
                              hint="give a JSONL file: one JSON object per line")
    if path.stat().st_size > MAX_PROMPT_BYTES and what == "--prompts":
        raise BenchInputError(f"--prompts {path} is {path.stat().st_size >> 20} MiB; the prompt set is sent to "
                              f"the target whole, at most {MAX_PROMPT_BYTES >> 20} MiB",
                              hint="take a sample of the prompts (e.g. `shuf -n 2000 FILE`)")
    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise BenchInputError(f"{path} line {number} is not JSON ({exc.msg} at column {exc.colno})",
                                      hint="each line must be one JSON object, e.g. {\"prompt\": \"...\"}") from None
            except UnicodeDecodeError:
                raise BenchInputError(f"{path} line {number} is not UTF-8 text",
                                      hint="save the file as UTF-8") from None
            if not isinstance(row, dict):
                raise BenchInputError(f"{path} line {number} is a JSON {type(row).__name__}, not an object",
                                      hint="each line must be one JSON object, e.g. {\"prompt\": \"...\"}")
            yield number, row


def _max_tokens(path: Path, number: int, row: dict[str, Any]) -> int | None:
    value = row.get("max_tokens", row.get("output_tokens"))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BenchInputError(f"{path} line {number}: max_tokens {str(value)[:20]!r} is not a positive whole number",
                              hint="write e.g. \"max_tokens\": 1750, or leave the key out")
    return value


def prompt_file(path: Path) -> list[dict[str, Any]]:
    """{"prompt": "text"[, "max_tokens": N]} per line (also accepted: "text")."""
    out = []
    for number, row in _lines(path, "--prompts"):
        text = row.get("prompt", row.get("text"))
        if not isinstance(text, str) or not text:
            keys = ", ".join(sorted(row)[:6]) or "none"
            raise BenchInputError(f"{path} line {number} has no \"prompt\" text (keys: {keys})",
                                  hint="each line needs {\"prompt\": \"...\"}; \"max_tokens\" is optional")
        entry: dict[str, Any] = {"prompt": text}
        tokens = _max_tokens(path, number, row)
        if tokens:
            entry["max_tokens"] = tokens
        out.append(entry)
    if not out:
        raise BenchInputError(f"--prompts {path} holds no prompt", hint="one JSON object per line")
    return out


def job_file(path: Path) -> tuple[int, float | None]:
    """A job's JSONL: how many samples, and their mean max_tokens where every line gives one."""
    count, given = 0, []
    for number, row in _lines(path, "--job"):
        count += 1
        tokens = _max_tokens(path, number, row)
        if tokens:
            given.append(tokens)
    if not count:
        raise BenchInputError(f"--job {path} holds no sample", hint="one JSON object per line")
    return count, (sum(given) / len(given) if len(given) == count else None)
