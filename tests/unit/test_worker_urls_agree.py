"""The router's worker URLs and what readiness waits for agree for every `host` (issue 41): with
README's `host: 0.0.0.0` the router had http://0.0.0.0:PORT while Ready waited for
http://127.0.0.1:PORT in the router's /workers, and every run failed after 120 s. The facts are
the recorded debian12-cpu snapshot (two CPU servers and a router; see its README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode import pipeline, roles
from gpunode.inventory import Host, Target
from gpunode.steps.health import Ready
from gpunode.transport import LocalTransport

SNAPSHOT = Path(__file__).resolve().parents[1] / "data" / "snapshots" / "debian12-cpu"


def planned(**chosen):
    v = {**roles.defaults(), "model_source": "/mnt/models/tiny-qwen3", "engine": "vllm-cpu", **chosen}
    target = Target(Host(name="local", address="127.0.0.1", connection="local"), None, v, {})
    job = pipeline.prepare(target, LocalTransport(), facts_dir=SNAPSHOT)
    ready = next(s for p in job.roles for s in p.steps if isinstance(s, Ready))
    return job.plan, ready


@pytest.mark.parametrize(("host", "reached"), [("127.0.0.1", "127.0.0.1"), ("0.0.0.0", "127.0.0.1"),
                                               ("::", "127.0.0.1"), ("10.1.2.3", "10.1.2.3"),
                                               ("fd00::5", "[fd00::5]")])
def test_the_router_lists_the_urls_readiness_waits_for(host, reached):
    plan, ready = planned(host=host)
    servers = [e.url for e in ready.endpoints if e.name != "router"]
    assert len(servers) == 2 and list(plan.router.worker_urls) == servers
    assert all(u.startswith(f"http://{reached}:") for u in servers), servers


@pytest.mark.parametrize(("router_host", "reached"), [("0.0.0.0", "127.0.0.1"), ("10.1.2.3", "10.1.2.3")])
def test_readiness_asks_the_router_where_it_listens(router_host, reached):
    plan, ready = planned(router_host=router_host)
    router = next(e for e in ready.endpoints if e.name == "router")
    assert router.url == f"http://{reached}:{plan.router.port}"
