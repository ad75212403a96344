"""Venv step: a real venv, offline installs from a real (tiny) wheelhouse."""

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from gpunode.engine import probe
from gpunode.errors import StepError
from gpunode.steps.base import Change, NoChange, Probe
from gpunode.steps.venv import Venv
from gpunode.transport import LocalTransport
from tests.wheels import make_wheel


def _check(step, t):
    r = t.run(step.probe())
    return step.check(Probe(r.exit_code, r.stdout))


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory):
    d = tmp_path_factory.mktemp("wheels")
    make_wheel(d, "gpn-engine", "1.0", requires=("gpn-kernel==0.4.1",))
    make_wheel(d, "gpn-engine", "1.1", requires=("gpn-kernel==0.4.2",))
    make_wheel(d, "gpn-kernel", "0.4.1")
    make_wheel(d, "gpn-kernel", "0.4.2")
    make_wheel(d, "gpn-extra", "2.0")
    return d


def _venv(tmp_path, wheelhouse, reqs, **kw):
    return Venv(path=str(tmp_path / "venvs" / "set-a"), requirements=reqs, no_index=True,
                find_links=[str(wheelhouse)], **kw)


def test_install_verify_then_noop(tmp_path, wheelhouse):
    t = LocalTransport()
    step = _venv(tmp_path, wheelhouse, ["gpn-engine==1.0", "gpn-extra==2.0"], remove_after=["gpn-extra"],
                 verify=[["python", "-c", "import gpn_engine, gpn_kernel; assert gpn_kernel.__version__ == '0.4.1'"],
                         ["python", "-m", "pip", "check"]])
    plan = _check(step, t)
    assert isinstance(plan, Change) and plan.summary.startswith("create venv")
    step.apply(t)
    manifest = json.loads((tmp_path / "venvs" / "set-a" / "gpunode-lock.json").read_text())
    assert manifest["spec_hash"] == step.spec_hash() and manifest["spec"] == step.spec()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", manifest["verified_at"])
    # Written by the transports' atomic writer: its mode, and no temp file left beside it.
    venv_dir = tmp_path / "venvs" / "set-a"
    assert (venv_dir / "gpunode-lock.json").stat().st_mode & 0o777 == 0o644
    assert not list(venv_dir.glob(".gpunode.*"))
    again = _check(step, t)
    assert isinstance(again, NoChange) and "matches the resolved pin set (2 requirements" in again.reason
    assert t.run([str(tmp_path / "venvs/set-a/bin/python"), "-c", "import gpn_extra"]).exit_code == 1


def test_new_pin_reinstalls_and_says_what_changed(tmp_path, wheelhouse):
    t = LocalTransport()
    _venv(tmp_path, wheelhouse, ["gpn-engine==1.0"]).apply(t)
    newer = _venv(tmp_path, wheelhouse, ["gpn-engine==1.1"])
    plan = _check(newer, t)
    assert isinstance(plan, Change) and "+gpn-engine==1.1; -gpn-engine==1.0" in plan.summary
    newer.apply(t)
    out = t.run([str(tmp_path / "venvs/set-a/bin/python"), "-c", "import gpn_kernel; print(gpn_kernel.__version__)"])
    assert out.stdout.strip() == "0.4.2"


def test_drift_and_interrupted_install_are_detected(tmp_path, wheelhouse):
    t = LocalTransport()
    step = _venv(tmp_path, wheelhouse, ["gpn-engine==1.0"])
    step.apply(t)
    py = str(tmp_path / "venvs/set-a/bin/python")
    t.run([py, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheelhouse), "gpn-extra"], check=True)
    drift = _check(step, t)
    assert isinstance(drift, Change) and "site-packages changed since it was verified" in drift.summary
    (tmp_path / "venvs/set-a/gpunode-lock.json").unlink()  # as if the run died before the manifest
    cut = _check(step, t)
    assert isinstance(cut, Change) and "a previous install did not finish" in cut.summary


def test_failed_verification_leaves_no_manifest(tmp_path, wheelhouse):
    t = LocalTransport()
    step = _venv(tmp_path, wheelhouse, ["gpn-engine==1.0"], verify=[["python", "-c", "import torch"]])
    with pytest.raises(StepError, match=r"verifying with `python -c 'import torch'` in .*set-a failed"):
        step.apply(t)
    assert not (tmp_path / "venvs/set-a/gpunode-lock.json").exists()


def test_an_install_cut_off_after_a_packages_metadata_is_made_again_from_nothing(tmp_path, wheelhouse):
    """A full disk mid-install (issue 29): a package's metadata landed, its files did not, and no
    manifest was written. pip (uv too) takes the package for installed and skips it, so resuming in
    place failed its verification on every re-run; the venv is made again and the re-run converges."""
    t = LocalTransport()
    step = _venv(tmp_path, wheelhouse, ["gpn-engine==1.0"], verify=[["python", "-c", "import gpn_engine"]])
    step.apply(t)
    venv = tmp_path / "venvs/set-a"
    (venv / "gpunode-lock.json").unlink()
    files = [p for p in venv.glob("lib/python3*/site-packages/gpn_engine*") if not p.name.endswith(".dist-info")]
    assert files and list(venv.glob("lib/python3*/site-packages/gpn_engine-1.0.dist-info"))
    for path in files:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    plan = _check(step, t)
    assert isinstance(plan, Change) and plan.summary.startswith(f"remake {venv} ")
    assert "a previous install did not finish" in plan.summary
    step.apply(t)  # before: "verifying with `python -c 'import gpn_engine'` ... failed", on every re-run
    assert isinstance(_check(step, t), NoChange)


# What the probe and the manifest hashed before the listing moved into the shell and here: every
# manifest written earlier holds this pipeline's answer, so a no-op must still match it.
_OLD_LISTING = 'ls "$1"/lib/python3*/site-packages | grep -vx __pycache__ | LC_ALL=C sort | sha256sum | cut -c1-16'


def test_listing_hash_is_the_one_earlier_manifests_hold(tmp_path, wheelhouse):
    t = LocalTransport()
    step = _venv(tmp_path, wheelhouse, ["gpn-engine==1.0"])
    step.apply(t)
    (site,) = (tmp_path / "venvs/set-a/lib").glob("python3*/site-packages")
    for name in ("Zeta.pth", "a b.py", "_under", "__pycache__", "~tilde"):  # C order: upper, '_', lower, '~'
        (site / name).mkdir() if name in ("_under", "__pycache__") else (site / name).write_text("")
    (site / "dangling.pth").symlink_to(site / "gone")
    old = t.run(["sh", "-c", _OLD_LISTING, "sh", step.path], check=True).stdout.strip()
    manifest = json.loads((tmp_path / "venvs/set-a/gpunode-lock.json").read_text())
    manifest["listing"] = old  # as an earlier gpunode wrote it
    (tmp_path / "venvs/set-a/gpunode-lock.json").write_text(json.dumps(manifest, indent=1) + "\n")
    assert isinstance(_check(step, t), NoChange)


def test_drift_through_the_batch_a_removed_package_dir_or_interpreter(tmp_path, wheelhouse):
    t = LocalTransport()
    step = _venv(tmp_path, wheelhouse, ["gpn-engine==1.0"])
    step.apply(t)
    [same] = probe.run_batch(t, [step.probe()])
    assert isinstance(step.check(same), NoChange)
    (site,) = (tmp_path / "venvs/set-a/lib").glob("python3*/site-packages")
    shutil.rmtree(site / "gpn_kernel")  # a package deleted by hand
    [gone] = probe.run_batch(t, [step.probe()])
    drift = step.check(gone)
    assert isinstance(drift, Change) and "site-packages changed since it was verified" in drift.summary
    (tmp_path / "venvs/set-a/bin/python").unlink()
    [nopy] = probe.run_batch(t, [step.probe()])
    assert step.check(nopy).summary.startswith("create venv")


def test_the_probe_starts_no_program_but_cat(tmp_path, wheelhouse):
    t = LocalTransport()
    step = _venv(tmp_path, wheelhouse, ["gpn-engine==1.0"])
    step.apply(t)
    log = tmp_path / "execve.log"
    traced = ["strace", "-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", str(log), "sh", "-s"]
    text = probe.build([step.probe()], "gpunode-0123456789abcdef")
    out = t.run(traced, stdin=text.encode(), check=True).stdout
    [result] = probe.parse(out, 1, "gpunode-0123456789abcdef")
    assert isinstance(step.check(result), NoChange)
    started = [line.split('execve("', 1)[1].split('"', 1)[0] for line in log.read_text().splitlines()
               if "execve(" in line and line.rstrip().endswith("= 0")]
    assert [p.rsplit("/", 1)[-1] for p in started] == ["sh", "cat"], started


def test_the_apply_is_its_commands_in_order_the_install_watched(tmp_path, wheelhouse):
    step = _venv(tmp_path, wheelhouse, ["gpn-engine==1.0"], replace=["gpn-old"], remove_after=["gpn-extra"],
                 verify=[["python", "-c", "import gpn_engine"]], locked=["gpn-engine==1.0 --hash=sha256:ab"],
                 lock="tiny/pylock.toml@1a2b")
    commands = step.commands()
    assert [c.what for c in commands] == [
        "creating the venv", "removing gpn-old", f"writing {step.path}/gpunode-requirements.txt",
        "installing the locked pin set (tiny/pylock.toml@1a2b)", "removing gpn-extra",
        "verifying with `python -c 'import gpn_engine'`", "writing the lock manifest"]
    assert [c.watched for c in commands].count(True) == 1 and commands[3].watched
    assert commands[2].stdin == b"gpn-engine==1.0 --hash=sha256:ab\n"
    assert json.loads(commands[-1].stdin) == step.spec()  # the spec goes on stdin, not into the shown line
    assert all(c.timeout == step.timeout for c in commands if c.what.startswith(("installing", "verifying")))


def test_a_locked_package_removed_after_the_install_is_not_installed(tmp_path, wheelhouse):
    """The lock's lines go in with --no-deps, so the packages uninstalled right after (the CPU engine's
    CUDA triton and torchvision) are left out of the install: not fetched, not installed, and the venv
    ends the same. Their uninstall still runs, for a venv that had them from before."""
    step = _venv(tmp_path, wheelhouse, ["gpn-engine==1.0"], remove_after=["GPN_Extra"],
                 locked=["gpn-engine==1.0 --hash=sha256:ab", "gpn-extra==2.0 --hash=sha256:cd"], lock="t@1")
    commands = step.commands()
    assert commands[1].stdin == b"gpn-engine==1.0 --hash=sha256:ab\n"
    assert "removing GPN_Extra" in [c.what for c in commands]
    assert "install 1 locked packages (t)" in step.check(Probe(exit_code=0, output="")).summary
    assert step.spec()["locked"] == ["gpn-engine==1.0", "gpn-extra==2.0"]  # the lock's identity is unchanged


def test_an_install_that_fails_names_the_command_and_keeps_no_manifest(tmp_path, wheelhouse):
    step = _venv(tmp_path, wheelhouse, ["gpn-missing==9.9"])
    with pytest.raises(StepError, match=r"installing the pin set in .*set-a failed \(exit code \d+\)") as info:
        step.apply(LocalTransport())
    assert "gpn-missing" in info.value.evidence  # pip's own words, from the watched stream
    assert not (tmp_path / "venvs/set-a/gpunode-lock.json").exists()


@pytest.fixture
def uv_on_path(monkeypatch):
    """uv as a node has it (the base role's /usr/local/bin/uv): here the test venv's own."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def test_uv_makes_the_venv_without_pip_and_the_probe_reads_its_pyvenv_cfg(tmp_path, wheelhouse, uv_on_path):
    t = LocalTransport()
    venv = tmp_path / "venvs/set-a"
    step = _venv(tmp_path, wheelhouse, ["gpn-engine==1.0"], installer="uv", python=sys.executable,
                 verify=[["python", "-c", "import gpn_engine"],
                         [str(Path(sys.executable).parent / "uv"), "pip", "check", "--python", f"{venv}/bin/python"]])
    step.apply(t)
    cfg = (venv / "pyvenv.cfg").read_text()
    assert "\nuv = " in cfg and "version_info = " in cfg and "\nversion = " not in cfg  # uv's, not python -m venv's
    assert not list(venv.glob("bin/pip*")) and not list(venv.glob("lib/python3*/site-packages/pip"))
    [same] = probe.run_batch(t, [step.probe()])
    assert isinstance(step.check(same), NoChange)
    # an interpreter gone (a Python upgrade by apt): the venv is made again, by uv, and converges
    (venv / "bin/python").unlink()
    assert _check(step, t).summary.startswith("create venv")
    step.apply(t)
    assert "\nuv = " in (venv / "pyvenv.cfg").read_text() and isinstance(_check(step, t), NoChange)


def test_uv_with_an_interpreter_that_is_not_there_says_which(tmp_path, wheelhouse, uv_on_path):
    step = _venv(tmp_path, wheelhouse, ["gpn-engine==1.0"], installer="uv", python="python3.99")
    with pytest.raises(StepError, match=r"creating the venv in .*set-a failed") as info:
        step.apply(LocalTransport())
    assert "python3.99: not found" in info.value.evidence
    assert not (tmp_path / "venvs/set-a").exists()


def test_pip_as_the_installer_still_gets_a_venv_with_pip(tmp_path, wheelhouse):
    step = _venv(tmp_path, wheelhouse, ["gpn-engine==1.0"], installer="pip", verify=[["python", "-m", "pip", "check"]])
    step.apply(LocalTransport())
    assert "\nversion = " in (tmp_path / "venvs/set-a/pyvenv.cfg").read_text()


def uv_wheel(folder: Path, uv: Path, version: str, tag: str) -> Path:
    """uv's wheel as PyPI ships it: the binary under uv-VERSION.data/scripts/, no Python package."""
    import base64
    import hashlib
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    dist = f"uv-{version}.dist-info"
    files = {f"uv-{version}.data/scripts/uv": uv.read_bytes(),
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: uv\nVersion: {version}\n".encode(),
             f"{dist}/WHEEL": (f"Wheel-Version: 1.0\nGenerator: gpunode-tests\nRoot-Is-Purelib: false\n"
                               f"Tag: {tag}\n").encode()}
    record = [f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()},{len(b)}"
              for p, b in files.items()] + [f"{dist}/RECORD,,"]
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    out = folder / f"uv-{version}-{tag}.whl"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:  # stored: 38 MB written, not compressed
        for path, data in files.items():
            zf.writestr(path, data)
    return out


REAL_UV = Path(sys.executable).with_name("uv")


@pytest.mark.skipif(not REAL_UV.is_file() or os.uname().machine != "x86_64", reason="uv beside this Python (x86_64)")
def test_the_tools_venv_is_made_by_uv_from_its_wheel_without_pip(tmp_path):
    version = os.popen(f"{REAL_UV} --version").read().split()[1]
    house = tmp_path / "wheels"
    uv_wheel(house, REAL_UV, "0.0.1", "py3-none-manylinux_2_17_x86_64")  # another version: not this one
    uv_wheel(house, REAL_UV, version, "py3-none-musllinux_1_1_x86_64")  # the same, but for musl: a glibc
    uv_wheel(house, REAL_UV, version, "py3-none-manylinux_2_17_x86_64")  # target takes the manylinux one
    t = LocalTransport()
    tools = tmp_path / "opt/gpunode/tools"
    env_path = f"PATH={tools}/bin:/usr/bin:/bin"  # no uv on the target's PATH: this venv is what brings it
    step = Venv(path=str(tools), requirements=[f"uv=={version}"], no_index=True, find_links=[str(house)],
                installer="uv", uv_from_wheel=True, verify=[["uv", "--version"]])
    assert all(c.argv[0] != "uv" and "-m" not in c.argv[:4] for c in step.commands())  # no uv on PATH, no pip
    step.apply(t)
    assert t.run(["env", env_path, "uv", "--version"]).stdout.split()[:2] == ["uv", version]
    site = next(tools.glob("lib/python3*/site-packages"))
    assert sorted(p.name for p in site.iterdir() if p.name != "__pycache__") == [f"uv-{version}.dist-info"]
    assert not (tools / "bin/pip").exists() and not (tmp_path / "opt/gpunode/tools.uv-wheel").exists()
    assert isinstance(_check(step, t), NoChange)
    # the same venv, as pip made it before (same spec): nothing to do; and made again, it uses its own uv
    assert step.spec_hash() == Venv(path=str(tools), requirements=[f"uv=={version}"], no_index=True,
                                    find_links=[str(house)], verify=[["uv", "--version"]]).spec_hash()
    (tools / "gpunode-lock.json").unlink()  # an install cut off: made again from nothing, from the wheel
    step.apply(t)
    assert isinstance(_check(step, t), NoChange)


def test_without_its_wheel_the_tools_venv_says_where_it_looked(tmp_path):
    house = tmp_path / "wheels"
    make_wheel(house, "gpn-extra", "2.0")
    step = Venv(path=str(tmp_path / "tools"), requirements=["uv==0.13.9"], no_index=True, find_links=[str(house)],
                installer="uv", uv_from_wheel=True)
    with pytest.raises(StepError) as err:
        step.apply(LocalTransport())
    assert f"no uv wheel (version 0.13.9, {os.uname().machine}) in: {house}" in str(err.value)
