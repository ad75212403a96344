"""The lab's demo role on the search path, as a user puts a role folder there (roles_path and
templates_path): its templates render and its variables are typed while it is there, and the search
path is as it was after."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from gpunode import searchpath
from gpunode_lab import paths


@contextmanager
def on_path() -> Iterator[None]:
    before = searchpath.current()
    searchpath.use(roles_path=[str(paths.ROLES)], templates_path=[str(paths.TEMPLATES)])
    try:
        yield
    finally:
        searchpath.use(roles_path=[str(p) for p in before.roles], templates_path=[str(p) for p in before.templates])


@pytest.fixture
def demo_on_path() -> Iterator[None]:
    with on_path():
        yield
