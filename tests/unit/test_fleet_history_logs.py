"""`inv history` on the recorded journal of lab/200 (one demo run, one provision run), a
torn last line as a crash leaves it, and `inv logs`' checks of its options."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.engine.journal import read
from gpunode.errors import InventoryError
from gpunode.fleet import logs, render
from gpunode.transport import LocalTransport

DATA = Path(__file__).resolve().parents[1] / "data" / "fleet"
JOURNAL = (DATA / "journal-cpu.jsonl").read_text()


def history_of(tmp_path: Path, text: str) -> tuple[list[dict], list[str]]:
    (tmp_path / "journal.jsonl").write_text(text)
    notes: list[str] = []
    return render.runs(read(LocalTransport("lab/200"), str(tmp_path), notes)), notes


def test_runs_with_who_when_and_what_changed(tmp_path):
    runs, notes = history_of(tmp_path, JOURNAL)
    assert notes == []
    assert [(r["run"], r["by"], r["first"], r["steps"], r["handlers"]) for r in runs] == [
        ("20261203-133518-994eb0", "root@vm", "2026-12-03T13:35:19Z", 8, 2),
        ("20261203-133523-9fb9df", "root@vm", "2026-12-03T13:35:25Z", 24, 4)]
    steps = [c["step"] for c in runs[1]["changes"]]
    assert "file:/etc/systemd/system/gpunode-cpu0.service" in steps and "restart:gpunode-router.service" in steps
    text = "\n".join(render.history_lines("lab/200", runs, verbose=False))
    assert "run 20261203-133523-9fb9df: 24 step(s) changed, 4 handler(s) ran" in text
    assert "... 16 more (--verbose shows all)" in text
    assert "more" not in "\n".join(render.history_lines("lab/200", runs, verbose=True))


def test_a_torn_last_line_is_read_past_with_a_note(tmp_path):
    last = JOURNAL.splitlines()[-1]
    torn = JOURNAL[: len(JOURNAL) - len(last) // 2 - 1]   # a crash mid-append: half of the last line
    runs, notes = history_of(tmp_path, torn)
    assert sum(r["steps"] + r["handlers"] for r in runs) == len(JOURNAL.splitlines()) - 1
    assert len(notes) == 1 and "line 38 is not a whole entry" in notes[0]


def test_no_journal_is_no_runs(tmp_path):
    assert render.runs(read(LocalTransport("x"), str(tmp_path / "none"))) == []
    assert render.history_lines("x", [], False) == ["x: no runs recorded (gpunode has not changed anything here)"]


def test_logs_unit_names_and_refusals():
    assert logs.unit_for("cpu1", False) == "gpunode-cpu1.service"
    assert logs.unit_for(None, True) == "gpunode-router.service"
    assert logs.unit_for(None, False) == "gpunode-*"
    with pytest.raises(InventoryError, match="not both"):
        logs.unit_for("cpu1", True)
    with pytest.raises(InventoryError, match="is not a server name"):
        logs.unit_for("cpu1; rm -rf /", False)
    with pytest.raises(InventoryError, match="is not a time journalctl reads"):
        logs.argv("gpunode-*", "--output=json", 10, False)
    argv = logs.argv("gpunode-cpu1.service", "1 hour ago", 50, True)
    assert argv[4:] == ["gpunode-cpu1.service", "-n", "50", "--since", "1 hour ago", "--follow"]
