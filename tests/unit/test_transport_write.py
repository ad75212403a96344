"""Transport.write_file's script (transport/write.sh), run here with sh: a file arrives whole
with its mode, or not at all: a content whose sha256 is not the one sent leaves the old file
and no temp file, with the hash from an argument or from stdin's first line (a secret's)."""

from __future__ import annotations

import hashlib
import stat

import pytest

from gpunode.errors import CommandError
from gpunode.transport import LocalTransport
from gpunode.transport.base import SHA_ON_STDIN, write_argv


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_file_arrives_with_its_mode_in_a_folder_made_for_it(tmp_path):
    dest = tmp_path / "etc" / "gpunode" / "a b.env"
    LocalTransport().write_file(str(dest), b"X=1\n", mode=0o600, sha256=sha(b"X=1\n"))
    assert dest.read_bytes() == b"X=1\n" and stat.S_IMODE(dest.stat().st_mode) == 0o600
    assert sorted(p.name for p in dest.parent.iterdir()) == ["a b.env"]


def test_a_content_that_is_not_the_one_sent_leaves_the_old_file_and_no_temp_file(tmp_path):
    dest = tmp_path / "unit.service"
    dest.write_bytes(b"old\n")
    arrived, sent = sha(b"new but cut\n"), sha(b"new\n")
    with pytest.raises(CommandError) as err:
        LocalTransport().write_file(str(dest), b"new but cut\n", sha256=sent)
    assert f"content arrived with sha256 {arrived}, expected {sent}" in err.value.evidence
    assert dest.read_bytes() == b"old\n" and [p.name for p in tmp_path.iterdir()] == ["unit.service"]


def test_the_hash_on_stdin_is_checked_and_never_printed(tmp_path):
    dest = tmp_path / "cpu0.secrets.env"
    t = LocalTransport()
    expected = sha(b"KEY=s3cret\n")
    t.run(write_argv(str(dest), 0o600, None, SHA_ON_STDIN), stdin=f"{expected}\n".encode() + b"KEY=s3cret\n",
          check=True)
    assert dest.read_bytes() == b"KEY=s3cret\n"
    bad = t.run(write_argv(str(dest), 0o600, None, SHA_ON_STDIN), stdin=f"{expected}\n".encode() + b"KEY=other\n")
    assert bad.exit_code == 1 and bad.stderr == "the content that arrived is not the content sent\n"
    assert dest.read_bytes() == b"KEY=s3cret\n" and [p.name for p in tmp_path.iterdir()] == ["cpu0.secrets.env"]
