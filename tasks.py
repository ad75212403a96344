"""Invoke entry point. Stays thin: the task tree lives in gpunode.cli.main."""

from gpunode.cli.main import ns  # noqa: F401  (invoke looks for `ns`)
