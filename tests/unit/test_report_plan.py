import io
import json

from gpunode import secrets
from gpunode.report import JsonLines


def test_plan_event_carries_the_plan_and_is_redacted():
    secrets.register("s3cr3t-token-value")
    out = io.StringIO()
    JsonLines(out, redact=secrets.redact).plan("kpro6/200", {"schema": "gpunode.plan/1", "engine": "sglang",
                                                             "env": {"HF_TOKEN": "s3cr3t-token-value"}})
    event = json.loads(out.getvalue())
    assert event["type"] == "plan" and event["target"] == "kpro6/200" and event["v"] == 1
    assert event["plan"]["engine"] == "sglang" and event["plan"]["env"]["HF_TOKEN"] == "********"
