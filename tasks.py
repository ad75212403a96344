"""Invoke entry point. Stays thin: the task tree lives in gpunode.cli.main; the lab's tasks
(`inv lab.*`) come from the lab's own package, lab/gpunode_lab, which the wheel does not hold."""

import sys
from pathlib import Path

from gpunode.cli.main import ns

sys.path.insert(0, str(Path(__file__).resolve().parent / "lab"))  # a checkout without `pip install -e lab`
from gpunode_lab.tasks import ns as lab  # noqa: E402

ns.add_collection(lab)
