"""Waiting for Proxmox tasks (UPIDs) with progress and an error that carries the task log.

Create, start and stop return a UPID at once; the work runs in a worker on the node. A
task is done when its status is "stopped"; it succeeded only when `exitstatus` is "OK"
(or "WARNINGS: n"). proxmoxer's Tasks.blocking_status returns None on a timeout and
leaves exitstatus to the caller; this module turns both into PveErrors with the log tail.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_result, stop_after_delay, wait_exponential

from gpunode.errors import PveError

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Upid:
    """UPID:node:pid:pstart:starttime:type:id:user: (pid, pstart, starttime in hex)."""

    text: str
    node: str
    pid: int
    pstart: int
    starttime: int
    type: str
    id: str
    user: str


def decode_upid(upid: str) -> Upid:
    """proxmoxer's Tasks.decode_upid, its AssertionError (and a field that is not hex) as a PveError."""
    from proxmoxer.tools import Tasks

    try:
        d = Tasks.decode_upid(upid)
    except (AssertionError, ValueError, AttributeError):
        raise PveError(f"{upid!r} is not a Proxmox task id (UPID:node:pid:pstart:starttime:type:id:user:)",
                       hint="the API answered something other than a task id; see its answer above") from None
    return Upid(upid, d["node"], d["pid"], d["pstart"], d["starttime"], d["type"], d["id"], d["user"])


def last_result(state: RetryCallState) -> Any:
    """tenacity's retry_error_callback for a poll: out of time, the last answer is the answer."""
    assert state.outcome is not None  # called after an attempt
    return state.outcome.result()


def succeeded(exitstatus: str | None) -> bool:
    return exitstatus == "OK" or bool(exitstatus and exitstatus.startswith("WARNINGS:"))


def wait(client: Any, upid: str, *, what: str = "", timeout: float = 600, progress: Progress | None = None,
         poll: float = 0.25) -> dict[str, Any]:
    """Poll the task until it stops; return its status, or raise PveError with the log tail.

    Log lines are passed to `progress` as they appear. The poll interval grows to 2 s so that
    a long create does not hammer the API.
    """
    task = decode_upid(upid)
    base = f"nodes/{task.node}/tasks/{upid}"
    label = what or f"{task.type} {task.id}"
    seen = 0

    def poll_once() -> dict[str, Any]:
        nonlocal seen
        status = client.get(f"{base}/status")
        seen = _follow(client, base, seen, progress)
        return status

    # An API error is not retried (retry_if_result sees results only); a timeout returns the last status.
    status = Retrying(retry=retry_if_result(lambda st: st.get("status") != "stopped"),
                      stop=stop_after_delay(timeout), wait=wait_exponential(multiplier=poll, exp_base=1.5, max=2.0),
                      retry_error_callback=last_result)(poll_once)
    if status.get("status") != "stopped":
        raise PveError(f"task {label} still runs after {timeout:.0f} s ({upid})",
                       evidence=log_tail(client, base),
                       hint=f"watch it in the web UI or `pvenode task log {upid}`; re-running onboard "
                       "is safe once it ends")
    exitstatus = status.get("exitstatus")
    if not succeeded(exitstatus):
        raise PveError(f"task {label} failed on node {task.node}: {exitstatus}", evidence=log_tail(client, base),
                       hint="the task log above says why; fix that and run onboard again (it resumes)",
                       target=task.node)
    return dict(status)


def _follow(client: Any, base: str, seen: int, progress: Progress | None) -> int:
    if progress is None:
        return seen
    lines = client.get(f"{base}/log", start=seen, limit=500)
    for entry in lines:
        text = str(entry.get("t", ""))
        if text and text != "no content":
            progress(text)
    return seen + len(lines)


def log_tail(client: Any, base: str, lines: int = 20) -> str:
    try:
        entries = client.get(f"{base}/log", start=0, limit=5000)
    except PveError as exc:
        return f"(task log unavailable: {exc.message})"
    texts = [str(e.get("t", "")) for e in sorted(entries, key=lambda e: e.get("n", 0))]
    return "\n".join(texts[-lines:])
