"""python -m gpunode_lab up|down|status|destroy [--gpu-shape NAME] [--json]"""

from __future__ import annotations

import argparse
import json
import sys

from gpunode.errors import GpunodeError
from gpunode_lab import node, paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpunode_lab", description=__doc__)
    parser.add_argument("action", choices=["up", "down", "status", "destroy"])
    parser.add_argument("--gpu-shape", default=paths.DEFAULT_GPU_SHAPE,
                        help="recorded nvidia-smi shape replayed in container 201 (up only)")
    parser.add_argument("--json", action="store_true", help="print the status as JSON")
    args = parser.parse_args(argv)

    def progress(line: str) -> None:
        print(line, flush=True)

    try:
        if args.action == "up":
            result = node.up(args.gpu_shape, progress=progress)
        elif args.action == "down":
            result = node.down(progress=progress)
        elif args.action == "destroy":
            result = node.destroy(progress=progress)
        else:
            result = node.status()
    except GpunodeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json or args.action == "status":
        print(json.dumps(result, indent=2, sort_keys=True))
    return 0 if args.action != "status" or result["up"] else 3


if __name__ == "__main__":
    sys.exit(main())
