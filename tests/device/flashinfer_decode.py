"""One flashinfer JIT kernel on the GPU, checked against torch: prints one JSON line.

Run by cuda_path.py in a child process whose environment is the one under test (the plan's,
or a bare one), with an empty JIT workspace, so flashinfer must compile the decode kernel
with whatever nvcc that environment gives it. Not a pytest file: it needs a GPU.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
import traceback


def main() -> int:
    out: dict = {"env": {k: os.environ.get(k) for k in ("CUDA_HOME", "PATH", "LD_LIBRARY_PATH",
                                                        "FLASHINFER_WORKSPACE_BASE")},
                 "which_nvcc": shutil.which("nvcc")}
    try:
        import flashinfer
        import torch

        out["flashinfer"] = flashinfer.__version__
        out["torch"] = torch.__version__
        torch.manual_seed(0)
        heads, kv_heads, dim, kv_len = 32, 8, 128, 4096
        q = torch.randn(heads, dim, dtype=torch.float16, device="cuda")
        k = torch.randn(kv_len, kv_heads, dim, dtype=torch.float16, device="cuda")
        v = torch.randn(kv_len, kv_heads, dim, dtype=torch.float16, device="cuda")
        started = time.monotonic()
        o = flashinfer.single_decode_with_kv_cache(q, k, v)  # JIT-compiles on first use
        torch.cuda.synchronize()
        out["first_call_s"] = round(time.monotonic() - started, 2)
        group = heads // kv_heads
        kf = k.float().repeat_interleave(group, dim=1)  # [kv_len, heads, dim]
        vf = v.float().repeat_interleave(group, dim=1)
        scores = torch.einsum("hd,khd->hk", q.float(), kf) / math.sqrt(dim)
        ref = torch.einsum("hk,khd->hd", scores.softmax(dim=-1), vf)
        out["max_abs_err"] = float((o.float() - ref).abs().max())
        out["matches"] = bool(torch.allclose(o.float(), ref, atol=2e-3, rtol=2e-3))
        out["ok"] = out["matches"]
    except BaseException as exc:  # noqa: BLE001 - the failure is the result being recorded
        out["ok"] = False
        out["error"] = f"{type(exc).__name__}: {exc}"[-4000:]
        out["traceback_tail"] = traceback.format_exc()[-3000:]
    print(json.dumps(out))
    return 0 if out.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
