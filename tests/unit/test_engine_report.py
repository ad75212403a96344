"""What a person sees: one line per step, diffs, errors with their hint, and the recap table."""

from __future__ import annotations

import io

from rich.console import Console

from gpunode.engine.events import Event, TargetRecap
from gpunode.report import HumanReport, recap_event


def render(events, recaps, **kwargs) -> str:
    out = io.StringIO()
    report = HumanReport(Console(file=out, width=160, color_system=None), **kwargs)
    for item in [*events, *recaps]:
        report(item)
    report.finish(recaps)
    return out.getvalue()


DIFF = "--- /etc/a (target)\n+++ /etc/a (desired)\n@@ -1 +1 @@\n-port=1\n+port=2\n"


def test_check_mode_says_would_change_and_shows_the_diff_and_a_nothing_changed_recap():
    events = [
        Event("step", "kpro6/200", "demo", "file:/etc/a", "changed", "update /etc/a: content", 0.0, DIFF, True),
        Event("step", "kpro6/200", "demo", "apt:hello", "ok", "the package is already installed: hello 2.10-3",
              0.0, "", True),
    ]
    recap = TargetRecap("kpro6/200", check=True, ok=1, changed=1, duration=0.4, round_trips=2)
    text = render(events, [recap])
    assert "would change kpro6/200 demo: file:/etc/a  update /etc/a: content" in text
    assert "-port=1\n+port=2\n" in text
    assert "ok kpro6/200 demo: apt:hello  the package is already installed" in text
    assert "recap (check mode: nothing was changed)" in text
    row = next(line for line in text.splitlines() if line.startswith("│ kpro6/200"))
    assert [c.strip() for c in row.strip("│").split("│")] == ["kpro6/200", "1", "1", "0", "0", "0.4s", "2", "ok"]


def test_failures_show_every_line_and_ok_steps_can_be_hidden():
    error = "local: writing /x failed with exit code 1\nmkdir: cannot create directory\nhint: fix it"
    events = [Event("step", "t", "r", "file:/x", "failed", error, 0.2),
              Event("step", "t", "r", "dir:/y", "ok", "/y is already a directory with mode 0755")]
    recap = TargetRecap("t", ok=1, failed=1, duration=1.0, round_trips=5)
    text = render(events, [recap], show_ok=False)
    assert "failed t r: file:/x  local: writing /x failed with exit code 1" in text
    assert "mkdir: cannot create directory" in text and "hint: fix it" in text
    assert "dir:/y" not in text
    assert "FAILED" in text


def test_final_json_recap_sums_targets_and_redacts_errors():
    recaps = [TargetRecap("a", ok=3, changed=1, duration=2.0, round_trips=6),
              TargetRecap("b", skipped=4, duration=0.5, round_trips=1, error="b is locked, token=s3cret")]
    line = recap_event(recaps, redact=lambda s: s.replace("s3cret", "***"))
    assert (line["ok"], line["changed"], line["skipped"], line["succeeded"]) == (3, 1, 4, False)
    assert line["duration"] == 2.0
    assert line["targets"][1]["error"] == "b is locked, token=***"


def _shown(recaps, width: int = 80, brief: bool = False) -> str:
    out = io.StringIO()
    HumanReport(Console(file=out, width=width, color_system=None), brief=brief).finish(recaps)
    return out.getvalue()


def test_a_no_op_run_is_one_line_per_target_unless_verbose():
    recaps = [TargetRecap("lab/200", check=True, ok=29, duration=2.1, round_trips=1),
              TargetRecap("lab/201", check=True, ok=27, duration=1.9, round_trips=1)]
    assert _shown(recaps, brief=True) == ("lab/200: ok, nothing would change (29 steps, 1 round trip, 2.1s)\n"
                                          "lab/201: ok, nothing would change (27 steps, 1 round trip, 1.9s)\n")
    assert "recap (check mode" in _shown(recaps, brief=False)  # -v: the table
    recaps[1].changed = 1  # something to read: the table
    assert "recap (check mode" in _shown(recaps, brief=True)


def test_the_recap_never_cuts_unreachable_at_80_columns():
    long = "kpro-gpu-node-with-a-long-name-17/100200"
    gone = TargetRecap(long, ok=0, duration=12.3, round_trips=1, error="x", unreachable=True)
    shown = _shown([TargetRecap("lab/200", ok=29, changed=3, duration=2.1, round_trips=4), gone])
    assert max(len(line) for line in shown.splitlines()) <= 80
    assert "UNREACHABLE" in shown and "UNREACHAB…" not in shown
