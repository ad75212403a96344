"""apt-get's status lines (-o APT::Status-Fd=1) become `apt` progress in percent; the status lines
themselves stay out of the output kept for errors and -v. The recording's README says where it
was made."""

from __future__ import annotations

from pathlib import Path

from gpunode.steps.progress import AptSink

RECORDED = Path(__file__).resolve().parents[1] / "data" / "apt" / "status-fd-jq-curl.txt"


def test_a_real_install_reports_download_then_install_up_to_100():
    seen, lines = [], []
    sink = AptSink(lambda done, total, what: seen.append((done, total, what)), lines.append)
    data = RECORDED.read_bytes()
    for i in range(0, len(data), 97):  # as the transport streams it: chunks that cut lines anywhere
        sink.write(data[i:i + 97])
    sink.flush()
    assert seen and {t for _, t, _ in seen} == {100}
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen), "percent never goes back"
    phases = [w.split(":", 1)[0] for _, _, w in seen]
    assert "install" in phases and phases == sorted(phases, key=lambda p: p != "download"), "download before install"
    assert any(w.startswith("install: Installed ") or w.startswith("install: Setting up ") for _, _, w in seen)
    assert not any(x.startswith(("pmstatus:", "dlstatus:")) for x in lines), "status lines are not output"
    assert any(x.startswith("Setting up jq") for x in lines), lines
    assert sink.text == "\n".join(lines)


def test_a_finished_install_ends_at_100_even_when_apts_last_line_stops_short():
    # apt's last status line for the recorded install; a JSON sink throttled to one line a second
    # keeps only a line that reaches the total, so without finish() a short install showed none.
    seen = []
    sink = AptSink(lambda done, total, what: seen.append((done, total, what)))
    sink.write(b"dlstatus:1:0.0000:Retrieving file 1 of 2\npmstatus:curl:98.1132:Installed curl (amd64)\n")
    sink.flush()
    assert seen[-1][0] < 100
    sink.finish()
    assert seen[-1] == (100, 100, "install: done")
