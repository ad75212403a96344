"""Version comparisons (PEP 440 via `packaging`) for engine, driver, glibc, CUDA and Python versions."""

from __future__ import annotations

from functools import lru_cache

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version


@lru_cache(maxsize=512)
def parse(text: str) -> Version:
    return Version(text)


@lru_cache(maxsize=256)
def specifier(text: str) -> SpecifierSet:
    return SpecifierSet(text, prereleases=True)


def valid_version(text: str) -> bool:
    try:
        parse(text)
    except InvalidVersion:
        return False
    return True


def valid_specifier(text: str) -> bool:
    try:
        specifier(text)
    except InvalidSpecifier:
        return False
    return True


def matches(version: str, spec: str | None) -> bool:
    """True when `version` is inside `spec`; a missing spec matches every version."""
    return spec is None or specifier(spec).contains(parse(version), prereleases=True)


def at_least(version: str, floor: str) -> bool:
    return parse(version) >= parse(floor)


def major_minor(version: str) -> str:
    """"12.8.93" -> "12.8"; "13" -> "13.0"."""
    rel = parse(version).release
    return f"{rel[0]}.{rel[1] if len(rel) > 1 else 0}"


def in_range(version: str, low: str, high: str) -> bool:
    """Inclusive on both ends, compared on major.minor (for Python versions)."""
    v = parse(major_minor(version))
    return parse(low) <= v <= parse(high)
