from gpunode.steps.base import Change, NoChange, Probe
from gpunode.steps.health import Endpoint, Ready

EPS = [Endpoint("slot0", "gpunode-server@0.service", "http://127.0.0.1:30001", "tiny"),
       Endpoint("slot1", "gpunode-server@1.service", "http://127.0.0.1:30002", "tiny"),
       Endpoint("router", "gpunode-router.service", "http://127.0.0.1:30000", "tiny", "/readiness")]


def test_all_healthy_is_a_noop_naming_the_endpoints():
    out = "http://127.0.0.1:30001 200\nhttp://127.0.0.1:30002 200\nhttp://127.0.0.1:30000 200\n"
    outcome = Ready(endpoints=EPS).check(Probe(0, out))
    assert outcome == NoChange("all 3 endpoints answer their health check with 200 (slot0, slot1, router)")


def test_starting_server_503_and_refused_port_plan_a_wait():
    # vLLM refuses connections until ready (curl prints 000); SGLang answers 503 while starting.
    out = "http://127.0.0.1:30001 503\nhttp://127.0.0.1:30002 000\nhttp://127.0.0.1:30000 200\n"
    outcome = Ready(endpoints=EPS, grace_s=600).check(Probe(0, out))
    assert isinstance(outcome, Change)
    assert outcome.summary.startswith("wait up to 600s for slot0, slot1 to answer their health check")
