"""gpunode vs Ansible on the same work, cold and no-op, in the lab (needs `inv lab.up`).

    .venv/bin/python bench/vs_ansible.py --small            # quick: 0.2 GiB, 60 headers
    flock /tmp/gpunode-lab.lock .venv/bin/python bench/vs_ansible.py     # full: 2 GiB, 300 headers
    .venv/bin/python bench/vs_ansible.py --sides gpunode,tuned           # leave out Ansible as shipped

The work (bench/vs_ansible_work.py): apt check of two installed packages; a venv with an
offline install of 18 wheels from the lab's wheelhouse; a header tree copied from this
machine with modes kept, plus 20 symlinks into it; model shards staged into /dev/shm with
size checks; 8 env files + 8 units + a router unit, daemon-reload only on change; 9 ports
answering. Each side gets a fresh lab container (--vmid, removed afterwards) with the same
preparation (python3-venv and curl installed: what the apt check finds), then runs twice:
cold, then the no-op re-run. Everything goes through the lab's sshd and pct stand-in:

- gpunode: a child process (start-up included, as for ansible-playbook) running the work's
  role with one SSH connection and `pct exec`;
- Ansible tuned (bench/ansible/tuned.cfg) and Ansible as shipped with community.proxmox's
  pct_remote (shipped.cfg), the same playbook bench/ansible/site.yml.

pct calls are counted by a logging pct wrapper that all sides call instead of the lab's pct;
SSH logins are the distinct SSH connections those calls came over. Ansible (the PyPI
`ansible` bundle, which ships community.proxmox) lives in its own venv under --work and is
installed there on first use.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import vs_ansible_report as report  # noqa: E402
import vs_ansible_work as W  # noqa: E402

from gpunode_lab import containers, paths  # noqa: E402

HERE = Path(__file__).resolve().parent
ANSIBLE_DIR = HERE / "ansible"
ANSIBLE_PINS = ["ansible==12.3.0", "paramiko==5.1.0"]  # ansible 12.3.0 bundles ansible-core 2.19 + community.proxmox
SIDES = {"gpunode": "gpunode", "tuned": "Ansible tuned", "shipped": "Ansible as shipped"}

PCT_WRAPPER = """#!/bin/sh
# pct with a call log for bench/vs_ansible.py: the SSH connection each call came over, and the call.
printf '%s\\t%s %s\\n' "${{SSH_CONNECTION:-none}}" "$1" "$2" >> {log}
exec {pct} "$@"
"""


class Bench:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.work_dir = Path(args.work)
        self.work = W.Work.small() if args.small else W.Work()
        if args.shards_gib is not None:
            self.work = W.Work(**{**self.work.__dict__, "shards_gib": args.shards_gib})
        if args.headers is not None:
            self.work = W.Work(**{**self.work.__dict__, "headers": args.headers})
        self.log = self.work_dir / "pct.log"
        self.pct = self.work_dir / "bin" / "pct"
        self.venv = self.work_dir / "venv"

    # -- set-up, once ------------------------------------------------------------------------

    def prepare(self) -> None:
        if not (paths.PCT.exists() and paths.SSHD_PID.exists()):
            raise SystemExit("the lab is not up: run `inv lab.up` first (docs/lab.md)")
        (self.work_dir / "bin").mkdir(parents=True, exist_ok=True)
        self.pct.write_text(PCT_WRAPPER.format(log=self.log, pct=paths.PCT))
        self.pct.chmod(0o755)
        self.headers = self.work.make_headers(self.work_dir)
        self.shards = self.work.make_shards(self.work_dir)
        home = self.work_dir / "home"
        (home / ".ssh").mkdir(parents=True, exist_ok=True)
        (home / ".ssh" / "known_hosts").write_text(paths.KNOWN_HOSTS.read_text())
        (self.work_dir / "vars.json").write_text(json.dumps(W.ansible_vars(self.work, self.headers), indent=1))
        if any(s != "gpunode" for s in self.args.sides):
            self._ansible()

    def _ansible(self) -> None:
        if not (self.venv / "bin" / "ansible-playbook").exists():
            print(f"installing {' '.join(ANSIBLE_PINS)} into {self.venv} (once)", flush=True)
            subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True)
            subprocess.run([str(self.venv / "bin" / "pip"), "install", "-q", *ANSIBLE_PINS], check=True)
        shipped = next(self.venv.glob("lib/python3*/site-packages/ansible_collections/community/proxmox/"
                                      "plugins/connection/proxmox_pct_remote.py"))
        # pct_remote hard-codes /usr/sbin/pct; the lab's pct (our counting wrapper) lives elsewhere.
        # The copy differs from the shipped plugin in that path and its name only.
        text = shipped.read_text()
        assert text.count("'/usr/sbin/pct'") == 1, f"{shipped}: the pct path moved; update the bench"
        text = text.replace("'/usr/sbin/pct'", repr(str(self.pct))).replace("name: proxmox_pct_remote",
                                                                             "name: lab_pct_remote")
        plugins = self.work_dir / "plugins" / "connection"
        plugins.mkdir(parents=True, exist_ok=True)
        (plugins / "lab_pct_remote.py").write_text(text)

    # -- one side ----------------------------------------------------------------------------

    def container(self) -> containers.Container:
        memory = 2048 + int(self.work.shards_gib * 1024 * 1.25)
        mounts = (*containers.SHARES, containers.Mount(self.shards, W.SHARDS_IN_CT))
        return containers.Container(self.args.vmid, "cpu", "vsbench", memory, True, 2, 0, mounts)

    def fresh(self) -> containers.Container:
        ct = self.container()
        containers.remove(ct)
        containers.ensure(ct)
        containers.start(ct)
        apt = 'apt-get update -q && apt-get install -y -q --no-install-recommends "$@"'
        containers.attach(ct, ["env", "DEBIAN_FRONTEND=noninteractive", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                               "sh", "-c", apt, "sh", *W.PACKAGES], what="installing the packages the apt check finds")
        # Ansible's pip module imports `packaging` with the target's Python, which Debian's
        # python3 lacks (python3-packaging is not in the lab's apt source): the wheelhouse's
        # copy goes into dist-packages, for every side alike.
        unzip = "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])"
        containers.attach(ct, ["python3", "-c", unzip, f"{W.WHEELHOUSE}/{W.PACKAGING_WHEEL}",
                               "/usr/local/lib/python3.11/dist-packages"],
                          what="making `packaging` importable for Ansible's pip module")
        return ct

    def side(self, key: str) -> list[report.Run]:
        ct = self.fresh()
        runs = []
        try:
            for phase in ("cold", "no-op"):
                self.log.unlink(missing_ok=True)
                seconds, changed, ok, note = (self.gpunode() if key == "gpunode" else self.ansible(key, phase))
                calls = report.parse_pct_log(self.log.read_text() if self.log.exists() else "")
                runs.append(report.Run(SIDES[key], phase, seconds, calls, changed, ok, note))
                print(f"  {SIDES[key]} {phase}: {seconds:.2f} s, {calls.pct} pct calls, {calls.logins} logins, "
                      f"{changed} changed{'' if ok else ', FAILED'}", flush=True)
                if not ok:
                    break
            runs[-1].note = (runs[-1].note + " " + self.verify(ct)).strip()
        finally:
            if not self.args.keep:
                containers.remove(ct)
        return runs

    def gpunode(self) -> tuple[float, int, bool, str]:
        argv = [sys.executable, str(Path(__file__).resolve()), "--gpunode-run", "--vmid", str(self.args.vmid),
                "--work", str(self.work_dir)] + (["--small"] if self.args.small else [])
        for flag in ("shards_gib", "headers"):
            if getattr(self.args, flag) is not None:
                argv += [f"--{flag.replace('_', '-')}", str(getattr(self.args, flag))]
        started = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        try:
            recap = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return seconds, 0, False, f"no recap: {proc.stderr[-800:]}"
        ok = proc.returncode == 0 and not recap["failed"] and not recap["error"]
        # The rest of the time is the process: interpreter start, imports, building the plan.
        note = f"{recap['round_trips']} engine round trips, {recap['run_s']:.2f} s in run_target"
        if not ok:
            note += f"; {recap['error'] or proc.stderr[-800:]}"
        return seconds, recap["changed"], ok, note

    def ansible(self, key: str, phase: str) -> tuple[float, int, bool, str]:
        home = self.work_dir / "home"
        inv = self.work_dir / f"inventory-{key}.ini"
        host = (f"ct ansible_host={paths.SSH_ADDRESS} ansible_port={paths.SSH_PORT} ansible_user={paths.SSH_USER} "
                f"ansible_private_key_file={paths.CLIENT_KEY}")
        if key == "shipped":
            host += f" ansible_connection=lab_pct_remote proxmox_vmid={self.args.vmid}"
        else:
            host += (f" ansible_connection=ssh ansible_ssh_executable={ANSIBLE_DIR / 'pct-ssh'}"
                     f" ansible_ssh_common_args='-o UserKnownHostsFile={paths.KNOWN_HOSTS}'")
        inv.write_text(f"[bench]\n{host}\n")
        env = {**os.environ, "HOME": str(home), "ANSIBLE_CONFIG": str(ANSIBLE_DIR / f"{key}.cfg"),
               "ANSIBLE_CONNECTION_PLUGINS": str(self.work_dir / "plugins" / "connection"),
               "ANSIBLE_NOCOLOR": "1", "PATH": f"{self.venv / 'bin'}:{os.environ['PATH']}",
               "VSBENCH_PCT": str(self.pct), "VSBENCH_VMID": str(self.args.vmid)}
        self._stop_masters(home)  # each run logs in anew, as a run some minutes later would
        argv = [str(self.venv / "bin" / "ansible-playbook"), "-i", str(inv), str(ANSIBLE_DIR / "site.yml"),
                "--extra-vars", f"@{self.work_dir / 'vars.json'}"]
        started = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        seconds = time.perf_counter() - started
        out = self.work_dir / "logs" / f"{key}-{phase}.log"
        out.parent.mkdir(exist_ok=True)
        out.write_text(proc.stdout + proc.stderr)
        recap = report.parse_recap(proc.stdout)
        ok = proc.returncode == 0 and recap.get("failed", 1) == 0 and recap.get("unreachable", 1) == 0
        return seconds, recap.get("changed", 0), ok, "" if ok else f"see {out}"

    def _stop_masters(self, home: Path) -> None:
        for sock in (home / ".ansible" / "cp").glob("*") if (home / ".ansible" / "cp").exists() else []:
            subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "-p", str(paths.SSH_PORT),
                            f"{paths.SSH_USER}@{paths.SSH_ADDRESS}"], capture_output=True)

    def verify(self, ct: containers.Container) -> str:
        """What the user checks afterwards, the same for every side (printed with the last run)."""
        script = f"""
ls {W.ROOT}/venv/lib/python3*/site-packages | grep -c '\\.dist-info$' | sed 's/^/wheels=/'
find {W.ROOT}/include -type f | wc -l | sed 's/^/headers=/'
find {W.ROOT}/include -type f -perm -0100 | wc -l | sed 's/^/exec=/'
find {W.ROOT}/lib -type l | wc -l | sed 's/^/links=/'
du -sb {W.SHARDS_DEST} | cut -f1 | sed 's/^/shm_bytes=/'
n=0; for u in {' '.join(u[0] for u in self.work.units())}; do
  systemctl is-active -q $u && n=$((n+1)); done; echo active=$n
n=0; for u in {' '.join(self.work.urls())}; do
  [ "$(curl -s -o /dev/null -w '%{{http_code}}' $u)" = 200 ] && n=$((n+1)); done; echo answering=$n
"""
        out = containers.attach(ct, ["sh", "-c", script], what="checking the result").decode()
        return "[" + " ".join(out.split()) + "]"


def gpunode_run(args: argparse.Namespace) -> None:
    """The gpunode side, in its own process: connect, run the work's role, print the recap as JSON."""
    from gpunode.engine import run_target
    from gpunode.transport import PctTransport, SshSettings, SshTransport

    work = W.Work.small() if args.small else W.Work()
    if args.shards_gib is not None:
        work = W.Work(**{**work.__dict__, "shards_gib": args.shards_gib})
    if args.headers is not None:
        work = W.Work(**{**work.__dict__, "headers": args.headers})
    wd = Path(args.work)
    ssh = SshTransport(SshSettings(name="lab", address=paths.SSH_ADDRESS, port=paths.SSH_PORT, user=paths.SSH_USER,
                                   key_file=str(paths.CLIENT_KEY), known_hosts=(str(paths.KNOWN_HOSTS),)))
    try:
        ct = PctTransport(ssh, args.vmid, pct=str(wd / "bin" / "pct"), host_name="lab")
        recap = run_target(ct, W.gpunode_plan(work, wd / f"headers-{work.headers}" / "include"))
    finally:
        ssh.close()
    print(json.dumps({"changed": recap.changed, "failed": recap.failed, "error": recap.error,
                      "round_trips": recap.round_trips, "run_s": recap.duration}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="0.2 GiB in 4 shards, 60 headers (a quick run)")
    ap.add_argument("--shards-gib", type=float, default=None, help="size of the model shards (default 2, small 0.2)")
    ap.add_argument("--headers", type=int, default=None, help="files in the header tree (default 300, small 60)")
    ap.add_argument("--sides", default="gpunode,tuned,shipped", help="which of gpunode,tuned,shipped to run")
    ap.add_argument("--vmid", type=int, default=296, help="the fresh lab container each side gets (removed after)")
    ap.add_argument("--work", default="/var/tmp/gpunode-bench/vs-ansible",
                    help="inputs, Ansible's venv, logs (kept between runs)")
    ap.add_argument("--keep", action="store_true", help="leave the last side's container for a look")
    ap.add_argument("--gpunode-run", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.gpunode_run:
        gpunode_run(args)
        return
    args.sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    bad = [s for s in args.sides if s not in SIDES]
    if bad:
        ap.error(f"--sides: unknown side {bad[0]!r}; choose from {', '.join(SIDES)}")
    bench = Bench(args)
    bench.prepare()
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"gpunode vs Ansible, {when}, {os.uname().nodename}, {os.cpu_count()} cores; "
          f"container {args.vmid} (fresh per side)\nwork: {bench.work.describe()}", flush=True)
    runs: list[report.Run] = []
    for key in args.sides:
        runs += bench.side(key)
    print()
    print(report.table(runs))
    for line in report.goals(runs):
        print(line)


if __name__ == "__main__":
    main()
