"""A candidate judged by the engine installed on the node before it is started: judge/nodecheck.py,
as the servers role's judge runs it (steps/judge.py), but for one command line that no unit holds
yet, so no marker is read or kept and no lock manifest is asked for."""

from __future__ import annotations

import json
from typing import Any

from gpunode.steps.judge import SOURCE, WORKDIR, Verdicts
from gpunode.transport.base import Transport


def engine_verdict(target: Transport, engine: str, venv: str, args: list[str], env: dict[str, str],
                   deadline: float = 180.0) -> dict[str, Any]:
    """{"accepted": True|False|None, "error", "check", "where", "resolved", ...}: the engine's own verdict."""
    case = {"id": "tune", "engine": engine, "argv": list(args), "env": dict(env), "workdir": WORKDIR,
            "digest": ""}
    result = target.run([f"{venv.rstrip('/')}/bin/python", "-c", SOURCE.read_text(encoding="utf-8"), "--cases", "-",
                         "--deadline", f"{deadline:g}"], stdin=(json.dumps(case) + "\n").encode(),
                        timeout=deadline + 60)
    got = Verdicts.read(result.stdout)
    if got.verdicts:
        return dict(got.verdicts[0])
    return {"accepted": None, "error": f"no verdict (exit code {result.exit_code}): "
            f"{(result.stderr or result.stdout)[-400:]}"}


def refusal(verdict: dict[str, Any]) -> str:
    """"" when accepted; else the engine's own words (or why it could not judge)."""
    if verdict.get("accepted") is True:
        return ""
    head = "the engine refuses" if verdict.get("accepted") is False else "the engine could not judge"
    check = f" ({verdict['check']})" if verdict.get("check") else ""
    where = f" at {verdict['where']}" if verdict.get("where") else ""
    return f"{head}{check}: {str(verdict.get('error') or '').strip()}{where}"
