"""Idempotent resources, one module per kind."""

from gpunode.steps.base import Change, NoChange, Outcome, Probe, Step

__all__ = ["Change", "NoChange", "Outcome", "Probe", "Step"]
