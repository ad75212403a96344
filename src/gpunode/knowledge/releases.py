"""What PyPI offers of the packages a pin set pins: releases, and one release's own requirements.

`inv kb.refresh` asks this module which sglang, sglang-kernel, flashinfer-python and torch releases
are newer than the pin sets, and what a new sglang release pins (its Requires-Dist), to propose a
pin set for it (gpunode/knowledge/proposal.py).

Where a release's requirements come from, first that answers:
1. PyPI's JSON API for the version (`/pypi/<name>/<version>/json`);
2. the project's JSON (`/pypi/<name>/json`), whose `info` is the newest release's;
3. the METADATA file inside one of the release's wheels, read with HTTP range requests (the zip's
   directory and that one member: a few hundred KB of a wheel that may be 1 GB). Mirrors that only
   serve the project JSON and the files (this machine's PyPI does) answer this way.
Each answer says which URL it came from, so a proposal cites it.
"""

from __future__ import annotations

import io
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from gpunode.errors import GpunodeError

PYPI = os.environ.get("GPUNODE_PYPI_JSON", "https://pypi.org/pypi")
TIMEOUT = 60


class PypiError(GpunodeError):
    """PyPI could not be read, or answered something that is not a project's JSON."""


@dataclass(frozen=True)
class Release:
    version: str
    uploaded: str               # the first file's upload time (ISO 8601)
    yanked: bool                # every file of the release is yanked
    files: tuple[dict, ...]     # PyPI's file entries (filename, url, packagetype, ...)

    @property
    def prerelease(self) -> bool:
        return Version(self.version).is_prerelease


@dataclass(frozen=True)
class Project:
    name: str
    url: str                    # where its JSON came from
    releases: tuple[Release, ...]   # in version order, oldest first; every release PyPI lists
    latest: str                 # info.version
    latest_requires: tuple[str, ...]
    latest_python: str

    def final(self) -> list[Release]:
        """Releases a pin set may take: neither yanked nor a pre-release (nor a dev release)."""
        return [r for r in self.releases if not r.yanked and not r.prerelease]

    def newest(self) -> Release | None:
        final = self.final()
        return final[-1] if final else None

    def newer_than(self, version: str | None) -> list[Release]:
        if version is None:
            return self.final()
        return [r for r in self.final() if Version(r.version) > Version(version)]

    def as_of(self, when: str) -> Project:
        """The project as PyPI listed it at `when` (ISO 8601, UTC): the releases uploaded by then. `info`
        (the newest release's requirements) is dropped unless that release is among them."""
        kept = tuple(r for r in self.releases if r.uploaded <= when)
        known = any(r.version == self.latest for r in kept)
        return Project(self.name, f"{self.url} as of {when}", kept, self.latest if known else "",
                       self.latest_requires if known else (), self.latest_python if known else "")

    def get(self, version: str) -> Release | None:
        return next((r for r in self.releases if Version(r.version) == Version(version)), None)


@dataclass(frozen=True)
class Metadata:
    name: str
    version: str
    requires: tuple[str, ...]   # Requires-Dist, as written
    requires_python: str
    source: str                 # the URL that answered

    def pins(self, *, extras: tuple[str, ...] = (), machine: str = "x86_64",
             python: str = "3.12") -> dict[str, Requirement]:
        """Requirements that apply on Linux `machine` with `python` and `extras`, by normalised name."""
        env = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": machine,
               "python_version": python, "python_full_version": f"{python}.0", "os_name": "posix",
               "implementation_name": "cpython", "platform_python_implementation": "CPython"}
        out: dict[str, Requirement] = {}  # keyed by canonicalize_name (a str)
        for line in self.requires:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                raise PypiError(f"{self.name} {self.version}: Requires-Dist {line!r} is not a requirement",
                                hint=f"read it at {self.source}") from None
            if req.marker is not None and not any(
                    req.marker.evaluate({**env, "extra": e}) for e in (extras or ("",))):
                continue
            out[str(canonicalize_name(req.name))] = req
        return out


#: torch's project JSON, PyPI's largest we read, is a few MB; an answer past this is not PyPI's (issue 41:
#: an endless answer was a MemoryError)
MAX_ANSWER = 64 << 20
#: what PyPI writes in upload_time(_iso_8601); anything else (an escape sequence) is not printed
_UPLOADED = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:?\d{2})?)?")


def _get(url: str, headers: dict[str, str] | None = None) -> bytes:
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        # file:// of a FIFO hung; ftp:// and the rest are no PyPI
        raise PypiError(f"{url[:120]}: not an http(s) address", hint="GPUNODE_PYPI_JSON is PyPI's JSON API, "
                        "e.g. https://pypi.org/pypi")
    request = urllib.request.Request(url, headers={"User-Agent": "gpunode-kb-refresh", **(headers or {})})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:  # noqa: S310 (https or a test's loopback)
        body = answer.read(MAX_ANSWER + 1)
    if len(body) > MAX_ANSWER:
        raise PypiError(f"{url}: the answer is longer than {MAX_ANSWER >> 20} MiB", hint="is GPUNODE_PYPI_JSON "
                        "a PyPI JSON API?")
    return body


def _json(url: str) -> dict | None:
    """The JSON at `url`, None on 404."""
    try:
        body = _get(url, {"Accept": "application/json"})
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise PypiError(f"{url}: HTTP {exc.code}", hint="PyPI may be down; run again later") from None
    except (urllib.error.URLError, OSError) as exc:
        raise PypiError(f"{url}: {getattr(exc, 'reason', exc)}",
                        hint="kb.refresh needs https://pypi.org (or GPUNODE_PYPI_JSON pointing at a mirror)") from None
    try:
        doc = json.loads(body)
    except ValueError:
        raise PypiError(f"{url}: the answer is not JSON", hint="is GPUNODE_PYPI_JSON a PyPI JSON API?") from None
    if not isinstance(doc, dict):
        raise PypiError(f"{url}: the answer is not a JSON object", hint="is GPUNODE_PYPI_JSON a PyPI JSON API?")
    return doc


def project(name: str, base: str = PYPI) -> Project:
    url = f"{base.rstrip('/')}/{canonicalize_name(name)}/json"
    doc = _json(url)
    if doc is None:
        raise PypiError(f"{name} is not on PyPI ({url}: 404)", hint="check the package name in pinsets.yml")
    return parse_project(doc, url)


def parse_project(doc: dict, url: str) -> Project:
    """A project JSON (`/pypi/<name>/json`) as Releases; releases without files or versions PEP 440 cannot
    read are left out (PyPI keeps a few such from its early years)."""
    try:
        info, files = doc["info"], doc["releases"]
        name = str(info["name"])
    except (KeyError, TypeError):
        raise PypiError(f"{url}: no info.name or releases", hint="is this a PyPI project JSON?") from None
    shape = PypiError(f"{url}: not shaped as a PyPI project JSON (releases: version -> list of files)",
                      hint="is GPUNODE_PYPI_JSON a PyPI JSON API?")
    if not isinstance(info, dict) or not isinstance(files, dict) or not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", name):
        raise shape
    out = []
    for version, entries in files.items():
        try:
            Version(version)
        except (InvalidVersion, TypeError):
            continue
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise shape
        if not entries:
            continue
        times = [str(e.get("upload_time_iso_8601") or e.get("upload_time") or "") for e in entries]
        if not all(_UPLOADED.fullmatch(t) for t in times):
            bad = next(t for t in times if not _UPLOADED.fullmatch(t))
            raise PypiError(f"{url}: {name} {version}: upload time {bad[:40]!r} is not a date", hint="is "
                            "GPUNODE_PYPI_JSON a PyPI JSON API?")
        first = min(times)
        out.append(Release(version, first, all(bool(e.get("yanked")) for e in entries),
                           tuple(dict(e) for e in entries)))
    out.sort(key=lambda r: Version(r.version))
    return Project(name, url, tuple(out), str(info.get("version") or ""), tuple(info.get("requires_dist") or ()),
                   str(info.get("requires_python") or ""))


def metadata(proj: Project, version: str, base: str = PYPI) -> Metadata:
    """The release's own Requires-Dist (see the module's docstring for where it is read)."""
    url = f"{base.rstrip('/')}/{canonicalize_name(proj.name)}/{version}/json"
    doc = _json(url)
    if doc is not None and isinstance(doc.get("info"), dict):
        info = doc["info"]
        return Metadata(proj.name, version, tuple(info.get("requires_dist") or ()),
                        str(info.get("requires_python") or ""), url)
    if proj.latest and Version(proj.latest) == Version(version):
        return Metadata(proj.name, version, proj.latest_requires, proj.latest_python, proj.url)
    release = proj.get(version)
    if release is None:
        raise PypiError(f"{proj.name} {version} is not on PyPI", hint=f"releases: {proj.url}")
    wheel = _a_wheel(release)
    if wheel is None:
        raise PypiError(f"{proj.name} {version} has no wheel to read its requirements from",
                        hint=f"read them from its sdist by hand: {proj.url}")
    link = urllib.parse.urljoin(proj.url, str(wheel["url"]))
    return parse_metadata(wheel_metadata(link), link)


def parse_metadata(text: str, source: str) -> Metadata:
    """A wheel's METADATA file (RFC 822 headers; the description after them is not read)."""
    head = HeaderParser().parsestr(text)
    if not head.get("Name") or not head.get("Version"):
        raise PypiError(f"{source}: METADATA without Name or Version", hint="is it a wheel's METADATA?")
    return Metadata(str(head["Name"]), str(head["Version"]), tuple(head.get_all("Requires-Dist") or ()),
                    str(head.get("Requires-Python") or ""), source)


_MANYLINUX = re.compile(r"manylinux(?:_(\d+)_(\d+)|(2014|2010|1))_(x86_64|aarch64)")
_LEGACY = {"1": "2.5", "2010": "2.12", "2014": "2.17"}


def glibc_floor(release: Release, machine: str) -> tuple[bool, str | None]:
    """(has a wheel for Linux `machine`, the lowest glibc one of them needs): a pure-Python wheel needs
    none (None); manylinux2014 is glibc 2.17 (PEP 599), manylinux_2_34 2.34 (PEP 600)."""
    floors = []
    for f in release.files:
        name = str(f.get("filename", ""))
        if not name.endswith(".whl"):
            continue
        if name.endswith("-none-any.whl"):
            return True, None
        for m in _MANYLINUX.finditer(name):
            if m.group(4) == machine:
                floors.append(f"{m.group(1)}.{m.group(2)}" if m.group(1) else _LEGACY[m.group(3)])
    if not floors:
        return False, None
    return True, min(floors, key=Version)


def _a_wheel(release: Release) -> dict | None:
    """A Linux x86_64 or pure-Python wheel (all wheels of a release carry the same requirements, but
    a platform's own build is the one a pin set installs)."""
    wheels = [f for f in release.files if str(f.get("filename", "")).endswith(".whl") and f.get("url")]
    linux = [f for f in wheels if "x86_64" in f["filename"] and "linux" in f["filename"]]
    pure = [f for f in wheels if f["filename"].endswith("-none-any.whl")]
    best = linux or pure or wheels
    return min(best, key=lambda f: int(f.get("size") or 0)) if best else None


class _Ranged(io.RawIOBase):
    """A remote file read by HTTP range requests: what zipfile needs (seek, tell, read)."""

    def __init__(self, url: str):
        self.url, self.pos = url, 0
        req = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "gpunode-kb-refresh"})
        with urllib.request.urlopen(req, timeout=TIMEOUT) as answer:  # noqa: S310
            self.size = int(answer.headers["Content-Length"])

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        body = _get(self.url, {"Range": f"bytes={self.pos}-{end - 1}"})
        if len(body) != end - self.pos:
            raise PypiError(f"{self.url}: asked for {end - self.pos} bytes, got {len(body)}",
                            hint="the server ignores HTTP range requests; download the wheel and read its METADATA")
        self.pos = end
        return body

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def wheel_metadata(url: str) -> str:
    """The text of a remote wheel's *.dist-info/METADATA, read without downloading the wheel."""
    try:
        with zipfile.ZipFile(io.BufferedReader(_Ranged(url), buffer_size=256 * 1024)) as wheel:
            names = [n for n in wheel.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if not names:
                raise PypiError(f"{url}: no *.dist-info/METADATA in the wheel", hint="is it a wheel?")
            return wheel.read(names[0]).decode()
    except urllib.error.URLError as exc:
        raise PypiError(f"{url}: {getattr(exc, 'reason', exc)}", hint="PyPI's files host could not be read") from None
    except zipfile.BadZipFile as exc:
        raise PypiError(f"{url}: not a zip ({exc})", hint="is it a wheel?") from None
