import io
import json

from gpunode import secrets
from gpunode.engine.events import Event
from gpunode.report import JsonLines


def test_secret_variables_are_masked_in_json_events():
    secrets.register_vars({"pve": {"api_token": "c0ffee-1234-secret"}, "model_name": "Qwen3.6-27B"})
    out = io.StringIO()
    sink = JsonLines(out, redact=secrets.redact)
    sink(Event("step", "kpro6/200", "engine", "file:/etc/gpunode/x.env", "changed",
               "wrote PVE_TOKEN=c0ffee-1234-secret for Qwen3.6-27B"))
    line = json.loads(out.getvalue())
    assert line["reason"] == "wrote PVE_TOKEN=******** for Qwen3.6-27B"


def test_short_values_are_not_registered():
    secrets.register("abc")
    assert secrets.redact("abc def") == "abc def"
