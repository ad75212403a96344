"""Lines read back from a target's journal (`inv logs`, `inv history`) are masked by shape too:
an engine prints its API key at start-up, and the journal outlives the inventory that would
have registered the key. The lines are real: SGLang 0.5.23's start-up and decode lines from the
H100 run (tests/data/device/h100-serve), vLLM's from the lab (tests/data/snapshots/lab-cpu-fleet),
each given the key as the engine prints it when one is set."""

from __future__ import annotations

import io
import json
from pathlib import Path

from gpunode.cli.fleet import _Through
from gpunode.secrets import MASK, redact_log

DATA = Path(__file__).parent.parent / "data"
KEY = "sk-lab-7Qm2vX9pL4"


def sglang_lines() -> list[str]:
    run = json.loads((DATA / "device" / "h100-serve" / "serve-dense.json").read_text())
    return [*run["server_args"], *run["log_excerpt"]]


def test_sglangs_server_args_line_loses_the_key_and_keeps_the_rest():
    start = next(ln for ln in sglang_lines() if "server_args=ServerArgs(" in ln)
    assert "api_key=None" in start
    keyed = start.replace("api_key=None", f"api_key='{KEY}'", 1)
    out = redact_log(keyed)
    assert KEY not in out and f"api_key='{MASK}'" in out
    assert out.replace(f"'{MASK}'", "None", 1) == start   # nothing else touched


def test_decode_counters_and_none_values_are_not_masked():
    decode = [ln for ln in sglang_lines() if "Decode batch" in ln]
    assert decode and all(redact_log(ln) == ln for ln in decode)
    start = next(ln for ln in sglang_lines() if "server_args=ServerArgs(" in ln)
    assert redact_log(start) == start


def test_vllm_non_default_args_and_a_logged_command_line():
    line = next(ln for ln in (DATA / "snapshots" / "lab-cpu-fleet" / "doctor_journal.txt").read_text().splitlines()
                if "non-default args:" in ln)
    keyed = line.replace("'max_num_seqs': 64", f"'max_num_seqs': 64, 'api_key': ['{KEY}']")
    assert keyed != line and KEY not in redact_log(keyed) and redact_log(line) == line
    argv = f"python3 -m sglang_router.launch_router --api-key {KEY} --port 8000"
    assert redact_log(argv) == f"python3 -m sglang_router.launch_router --api-key {MASK} --port 8000"


def test_follow_masks_a_key_split_over_two_reads():
    out = io.BytesIO()
    sink = _Through(out)
    line = f"server_args=ServerArgs(api_key='{KEY}', port=30000)\nnext line\npartial"
    cut = line.index(KEY) + 5
    sink.write(line[:cut].encode())
    sink.write(line[cut:].encode())
    sink.flush()
    assert KEY.encode() not in out.getvalue() and out.getvalue().endswith(b"next line\npartial")
