"""The load client that `inv bench` runs ON the target, with the engine venv's own Python.

Standalone on purpose (stdlib + aiohttp + tokenizers, which every vLLM and SGLang venv
holds; no gpunode import): it is sent as `python -c` text through the transport, so it
reaches the servers on the container's loopback with no port forward and no install.

stdin: one JSON object (see gpunode.bench.runner.client_request). stdout: `@@progress DONE
TOTAL LABEL` lines while it runs, then one line `@@result {json}` with one record per
request; statistics are computed by gpunode (gpunode.bench.stats), not here.
A record is [start_s, ttft_s, latency_s, output_tokens, prompt_tokens, error], times
relative to the start of the run; error is "" for a good request.
"""

import asyncio
import json
import random
import sys
import time

import aiohttp


def random_prompts(spec):
    """Random token ids decoded to text, re-encoded and trimmed to input_len tokens where the
    tokenizer allows (as vLLM's random dataset does): text, because sglang-router accepts only
    a string or strings as `prompt`."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(spec["tokenizer"])
    vocab = tok.get_vocab_size(with_added_tokens=False)
    lo, hi = max(1, vocab // 10), max(2, vocab * 9 // 10)  # away from special tokens at either end
    rng = random.Random(spec["seed"])
    out = []
    for _ in range(spec["count"]):
        ids = [rng.randrange(lo, hi) for _ in range(spec["input_len"])]
        text = tok.decode(ids)
        for _ in range(4):
            again = tok.encode(text, add_special_tokens=False).ids
            if len(again) == spec["input_len"]:
                break
            again = again[: spec["input_len"]] + [rng.randrange(lo, hi) for _ in range(spec["input_len"] - len(again))]
            text = tok.decode(again)
        out.append({"prompt": text})
    return out


async def one(session, url, body, t0, timeout, key=""):
    start = time.perf_counter()
    ttft, tokens, chunks, prompt_tokens, error = -1.0, 0, 0, 0, ""
    done = False
    try:
        async with session.post(url + "/v1/completions", json=body,
                                headers={"Authorization": "Bearer " + key} if key else None,
                                timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            if resp.status != 200:
                text = (await resp.text())[:200].replace("\n", " ")
                return [start - t0, -1.0, time.perf_counter() - start, 0, 0, f"HTTP {resp.status}: {text}"]
            async for raw in resp.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                    break
                msg = json.loads(data)
                if msg.get("error"):
                    error = str(msg["error"])[:200]
                    break
                for choice in msg.get("choices") or []:
                    if choice.get("text"):
                        if ttft < 0:
                            ttft = time.perf_counter() - start
                        chunks += 1
                usage = msg.get("usage")
                if usage:
                    tokens = usage.get("completion_tokens") or 0
                    prompt_tokens = usage.get("prompt_tokens") or 0
    except TimeoutError:
        error = f"no complete answer within {timeout:.0f} s"
    except (aiohttp.ClientError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"[:200]
    if not error and not done:
        error = "the stream ended without [DONE]"
    # A server that sends no usage block: one streamed chunk is one token (vLLM, SGLang).
    return [start - t0, ttft, time.perf_counter() - start, tokens or chunks, prompt_tokens, error]


async def endpoint_load(session, ep, prompts, req, t0, progress):
    queue = list(range(ep["requests"]))
    records = []

    async def worker():
        while queue:
            i = queue.pop(0)
            p = prompts[i % len(prompts)]
            body = {"model": ep["model"], "prompt": p["prompt"], "max_tokens": p.get("max_tokens") or req["output_len"],
                    "temperature": req["temperature"], "stream": True, "stream_options": {"include_usage": True},
                    "ignore_eos": req["ignore_eos"]}
            records.append(await one(session, ep["url"], body, t0, req["timeout_s"], ep.get("api_key", "")))
            progress()

    await asyncio.gather(*(worker() for _ in range(ep["concurrency"])))
    return records


async def paced_load(session, ep, prompts, req, t0, progress):
    """A steady load: `rate` requests a second, at most `max_in_flight` at once (a request due while
    that many are open waits for one to end), until `duration_s` has passed or `stop_file` exists.
    What a job sees while servers are replaced behind the router (docs/upgrade.md)."""
    import os

    records, open_ = [], set()
    gate = asyncio.Semaphore(ep.get("max_in_flight") or 8)
    i, every = 0, 1.0 / ep["rate"]

    async def send(body):
        try:
            records.append(await one(session, ep["url"], body, t0, req["timeout_s"], ep.get("api_key", "")))
            progress()
        finally:
            gate.release()

    while time.perf_counter() - t0 < ep.get("duration_s", 3600) and not (
            ep.get("stop_file") and os.path.exists(ep["stop_file"])):
        await asyncio.sleep(max(0.0, t0 + i * every - time.perf_counter()))
        await gate.acquire()
        p = prompts[i % len(prompts)]
        body = {"model": ep["model"], "prompt": p["prompt"], "max_tokens": p.get("max_tokens") or req["output_len"],
                "temperature": req["temperature"], "stream": True, "stream_options": {"include_usage": True},
                "ignore_eos": req["ignore_eos"]}
        task = asyncio.ensure_future(send(body))
        open_.add(task)
        task.add_done_callback(open_.discard)
        i += 1
    await asyncio.gather(*open_)
    return records


async def main(req):
    prompts = req["prompts"] if isinstance(req["prompts"], list) else random_prompts(req["prompts"])
    total = sum(ep.get("requests", 0) for ep in req["endpoints"])
    state = {"done": 0, "shown": 0.0}

    def progress():
        state["done"] += 1
        now = time.perf_counter()
        if now - state["shown"] >= 0.5 or state["done"] == total:
            state["shown"] = now
            print(f"@@progress {state['done']} {total} {req['label']}", flush=True)

    limit = sum(ep.get("concurrency") or ep.get("max_in_flight") or 8 for ep in req["endpoints"])
    connector = aiohttp.TCPConnector(limit=limit + 4, force_close=False)
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
        warm = []
        for ep in req["endpoints"]:  # one request each, not measured: first-request costs stay out
            body = {"model": ep["model"], "prompt": prompts[0]["prompt"], "max_tokens": 4, "stream": True,
                    "ignore_eos": req["ignore_eos"]}
            warm.append(await one(session, ep["url"], body, time.perf_counter(), req["timeout_s"],
                                  ep.get("api_key", "")))
        t0, t0_wall = time.perf_counter(), time.time()
        results = await asyncio.gather(*((paced_load if ep.get("rate") else endpoint_load)(
            session, ep, prompts, req, t0, progress) for ep in req["endpoints"]))
        wall = time.perf_counter() - t0
    return {"label": req["label"], "wall_s": wall, "t0_wall": t0_wall, "warmup_errors": [w[5] for w in warm if w[5]],
            "aiohttp": aiohttp.__version__, "python": sys.version.split()[0],
            "endpoints": {ep["name"]: recs for ep, recs in zip(req["endpoints"], results, strict=True)}}


if __name__ == "__main__":
    result = asyncio.run(main(json.load(sys.stdin)))
    print("@@result " + json.dumps(result), flush=True)
