#!/usr/bin/python3 -IS
# STAND-IN for Proxmox VE's `pct` (pve-container, src/PVE/CLI/pct.pm), installed by the
# gpunode lab as /var/lib/gpunode-lab/bin/pct. It is NOT Proxmox. It follows real pct's
# documented CLI for the subcommands gpunode uses, over lxc-attach/lxc-info/lxc-start:
#
#   exec <vmid> [--keep-env 0|1] -- <cmd...>   lxc-attach -n <vmid> --keep-env|--clear-env -- <cmd...>
#   status <vmid> [--verbose]  list  config <vmid>  start <vmid>  stop <vmid>  shutdown <vmid>
#   push <vmid> <file> <destination> [--perms] [--user] [--group]   pull <vmid> <path> <destination>
#
# What it copies from the real thing (see pct.pm and pve-common's JSONSchema::get_options):
# - options are parsed like Getopt::Long with permutation and prefix (--|-), so
#   `pct exec 200 ls -la` fails ("Unknown option: la", "400 unable to parse option");
#   the command must follow `--`;
# - the container must exist on this node ("Configuration file 'nodes/lab/lxc/<vmid>.conf'
#   does not exist") and run ("container '<vmid>' not running!"), checked in that order,
#   then "missing command"; running = the LXC command socket is listed in /proc/net/unix;
# - exec: keep-env defaults to 1, SSL_CERT_FILE/SSL_CERT_DIR are removed, PATH is
#   /sbin:/bin:/usr/sbin:/usr/bin, the process becomes lxc-attach (exit code = the command's);
# - push/pull take the config lock and open the file inside the container's mount
#   namespace (setns), so symlinks cannot lead out of the container; push creates the file
#   like create_file() (explicit perms, octal unless 0x, user/group names of the container);
# - pct-level errors go to stderr and exit non-zero (255, as a Perl die would).
#
# It must start fast: only os and sys are imported on the exec path; keep it that way.
# push and pull live in pct_transfer.py, imported only when they run.

import os
import sys

NODE = "lab"
LXC_PATH = "/var/lib/gpunode-lab/lxc"
PVE_LXC = "/var/lib/gpunode-lab/pve/nodes/lab/lxc"
LOCK_DIR = "/var/lib/gpunode-lab/run"
PCT_PM = "/usr/share/perl5/PVE/CLI/pct.pm"  # where real pct's messages point ("at ... line N")

BOOL, STR, LIST = "bool", "str", "list"

# command -> (positional arg names, option kinds, usage line)
COMMANDS = {
    "exec": (["vmid", "extra-args"], {"vmid": STR, "keep-env": BOOL, "extra-args": LIST},
             "pct exec <vmid> [<extra-args>] [OPTIONS]"),
    "status": (["vmid"], {"vmid": STR, "verbose": BOOL}, "pct status <vmid> [OPTIONS]"),
    "list": ([], {}, "pct list"),
    "config": (["vmid"], {"vmid": STR, "current": BOOL, "snapshot": STR}, "pct config <vmid> [OPTIONS]"),
    "start": (["vmid"], {"vmid": STR, "skiplock": BOOL, "debug": BOOL}, "pct start <vmid> [OPTIONS]"),
    "stop": (["vmid"], {"vmid": STR, "skiplock": BOOL, "overrule-shutdown": BOOL}, "pct stop <vmid> [OPTIONS]"),
    "shutdown": (["vmid"], {"vmid": STR, "timeout": STR, "forceStop": BOOL}, "pct shutdown <vmid> [OPTIONS]"),
    "push": (["vmid", "file", "destination"],
             {"vmid": STR, "file": STR, "destination": STR, "user": STR, "group": STR, "perms": STR},
             "pct push <vmid> <file> <destination> [OPTIONS]"),
    "pull": (["vmid", "path", "destination"],
             {"vmid": STR, "path": STR, "destination": STR, "user": STR, "group": STR, "perms": STR},
             "pct pull <vmid> <path> <destination> [OPTIONS]"),
}
# Real pct subcommands this stand-in does not implement (said plainly instead of "unknown").
NOT_HERE = {
    "clone", "console", "cpusets", "create", "delsnapshot", "destroy", "df", "enter", "fsck", "fstrim",
    "listsnapshot", "migrate", "mount", "move-volume", "pending", "reboot", "remote-migrate", "rescan", "resize",
    "restore", "resume", "rollback", "set", "snapshot", "suspend", "template", "unlock", "unmount",
}


class Die(Exception):
    """A Perl `die` in real pct: message to stderr, non-zero exit."""


def die(msg):
    raise Die(msg)


def param_error(msg, usage):
    die("400 " + msg + usage + "\n")


# -- option parsing (Getopt::Long with permute, prefix (--|-), auto-abbreviation) -------------

def getopt(args, spec):
    opts, rest, ok = {}, [], True
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            rest.extend(args[i + 1:])
            break
        if a.startswith("-") and a != "-":
            body = a[2:] if a.startswith("--") else a[1:]
            name, eq, val = body.partition("=")
            exact = [o for o in spec if o.lower() == name.lower()]
            matches = exact or [o for o in spec if o.lower().startswith(name.lower())]
            if len(matches) != 1:
                if matches:
                    sys.stderr.write("Option {} is ambiguous ({})\n".format(name, ", ".join(sorted(matches))))
                else:
                    sys.stderr.write(f"Unknown option: {name.lower()}\n")
                ok = False
                i += 1
                continue
            opt = matches[0]
            kind = spec[opt]
            if eq:
                value = val
            elif kind == BOOL:  # ":s" - optional value, not taken when it looks like an option
                nxt = args[i + 1] if i + 1 < len(args) else None
                if nxt is not None and nxt != "--" and (not nxt.startswith("-") or nxt == "-"):
                    value = nxt
                    i += 1
                else:
                    value = ""
            else:  # "=s" - mandatory value, taken whatever it looks like
                if i + 1 >= len(args):
                    sys.stderr.write(f"Option {opt} requires an argument\n")
                    ok = False
                    i += 1
                    continue
                value = args[i + 1]
                i += 1
            if kind == LIST:
                opts.setdefault(opt, []).append(value)
            else:
                opts[opt] = value
        else:
            rest.append(a)
        i += 1
    return ok, opts, rest


def parse(cmd, args):
    positional, spec, usage = COMMANDS[cmd]
    ok, opts, rest = getopt(args, spec)
    if not ok:
        param_error("unable to parse option\n", usage)
    for name in positional:
        if name == "extra-args":
            opts["extra-args"] = opts.get("extra-args", []) + rest
            rest = []
            break
        if not rest:
            if name not in opts:
                param_error("not enough arguments\n", usage)
            continue
        opts[name] = rest.pop(0)
    if rest:
        param_error("too many arguments\n", usage)
    for name, kind in spec.items():
        if kind == BOOL and name in opts:
            v = opts[name].lower()
            if v in ("", "1", "on", "yes", "true"):
                opts[name] = 1
            elif v in ("0", "off", "no", "false"):
                opts[name] = 0
            else:
                param_error("unable to parse boolean option\n", usage)
    vmid = opts.get("vmid")
    if vmid is not None and not (vmid.isascii() and vmid.isdigit() and vmid[0] != "0" and 3 <= len(vmid) <= 9):
        param_error("Parameter verification failed.\nvmid: invalid format - value does not look like "
                    "a valid VMID\n", usage)
    return opts


# -- container state ---------------------------------------------------------------------------

def conf_path(vmid):
    return f"{PVE_LXC}/{vmid}.conf"


def load_config(vmid):
    """PVE::LXC::Config->load_config: the top section of nodes/<node>/lxc/<vmid>.conf."""
    try:
        with open(conf_path(vmid), encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        die(f"Configuration file 'nodes/{NODE}/lxc/{vmid}.conf' does not exist\n")
    conf, lxc, description = {}, [], []
    for line in text.splitlines():
        if line.startswith("["):
            break  # snapshot or pending section
        if line.startswith("#"):
            description.append(line[1:])
            continue
        key, sep, value = line.partition(":")
        if not sep or not key.strip():
            continue
        key, value = key.strip(), value.strip()
        if key.startswith("lxc."):
            lxc.append((key, value))
        else:
            conf[key] = value
    if description:
        conf["description"] = "\n".join(description)
    return conf, lxc


def active_containers():
    """PVE::LXC::list_active_containers: LXC command sockets listed in /proc/net/unix."""
    prefix, suffix = "@" + LXC_PATH + "/", "/command"
    found = set()
    with open("/proc/net/unix", encoding="utf-8", errors="replace") as f:
        for line in f:
            path = line.rstrip("\n").rsplit(" ", 1)[-1]
            if path.startswith(prefix) and path.endswith(suffix):
                found.add(path[len(prefix):-len(suffix)])
    return found


def check_running(vmid):
    return vmid in active_containers()


def lxc(tool, vmid, *args):
    return [tool, "-P", LXC_PATH, "-n", vmid, *args]


def run_quiet(argv):
    """Run a helper; return (exit code, combined output)."""
    import subprocess

    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    return proc.returncode, (proc.stdout + proc.stderr).decode("utf-8", "replace")


def find_lxc_pid(vmid):
    code, out = run_quiet(lxc("lxc-info", vmid, "-p", "-H"))
    pid = out.strip()
    if code != 0 or not pid.isdigit():
        die(f"unable to get PID for CT {vmid} (not running?)\n")
    return int(pid)


def clean_environment():
    os.environ.pop("SSL_CERT_FILE", None)
    os.environ.pop("SSL_CERT_DIR", None)


# -- subcommands -------------------------------------------------------------------------------

def cmd_exec(o):
    vmid = o["vmid"]
    keep_env = o.get("keep-env", 1)
    load_config(vmid)  # test if container exists on this node
    if not check_running(vmid):
        die(f"container '{vmid}' not running!\n")
    if not o.get("extra-args"):
        die(f"missing command at {PCT_PM} line 246.\n")
    clean_environment()
    argv = lxc("lxc-attach", vmid, "--keep-env" if keep_env else "--clear-env", "--", *o["extra-args"])
    sys.stdout.flush()
    os.execvp(argv[0], argv)


def cmd_status(o):
    vmid = o["vmid"]
    conf, _ = load_config(vmid)
    running = check_running(vmid)
    status = "running" if running else "stopped"
    if not o.get("verbose"):
        print(f"status: {status}")
        return
    stat = {"status": status, "vmid": vmid, "name": conf.get("hostname", "CT" + vmid), "type": "lxc",
            "maxmem": int(conf.get("memory", "512")) * 1024 * 1024,
            "maxswap": int(conf.get("swap", "512")) * 1024 * 1024, "cpus": conf.get("cores", "1")}
    if running:
        stat["pid"] = find_lxc_pid(vmid)
    for k in sorted(stat):
        print(f"{k}: {stat[k]}")


def cmd_list(o):
    try:
        names = sorted((n[:-5] for n in os.listdir(PVE_LXC) if n.endswith(".conf") and n[:-5].isdigit()), key=int)
    except FileNotFoundError:
        names = []
    if not names:
        return
    active = active_containers()
    fmt = "%-10s %-10s %-12s %-20s\n"
    out = [fmt % ("VMID", "Status", "Lock", "Name")]
    for vmid in names:
        conf, _ = load_config(vmid)
        status = "running" if vmid in active else "stopped"
        out.append(fmt % (vmid, status, conf.get("lock", ""), conf.get("hostname", "CT" + vmid)))
    sys.stdout.write("".join(out))


def cmd_config(o):
    conf, lxc_keys = load_config(o["vmid"])
    out = []
    for k in sorted(conf):
        if k in ("digest", "lxc"):
            continue
        v = conf[k]
        if k == "description":
            v = "".join(c if c.isprintable() or c == " " else f"%{ord(c):02X}" for c in v.replace("\n", "%0A"))
        out.append(f"{k}: {v}\n")
    for k, v in lxc_keys:
        out.append(f"{k}: {v}\n")
    sys.stdout.write("".join(out))


def cmd_start(o):
    vmid = o["vmid"]
    load_config(vmid)
    if check_running(vmid):
        die(f"CT {vmid} already running\n")
    code, out = run_quiet(lxc("lxc-start", vmid))
    if code == 0:
        code, out2 = run_quiet(lxc("lxc-wait", vmid, "-s", "RUNNING", "-t", "30"))
        out += out2
    if code != 0:
        sys.stderr.write(out)
        die(f"startup for container '{vmid}' failed\n")


def cmd_stop(o, clean=False):
    vmid = o["vmid"]
    load_config(vmid)
    if not check_running(vmid):
        die(f"CT {vmid} not running\n")
    args = ["-t", o.get("timeout") or "60"] if clean else ["--kill"]
    code, out = run_quiet(lxc("lxc-stop", vmid, *args))
    if code != 0 and check_running(vmid):
        sys.stderr.write(out)
        die(f"stopping container '{vmid}' failed\n")


def _transfer():
    """push/pull live in pct_transfer.py, imported only when used (exec must start fast)."""
    import importlib

    return importlib.import_module(__name__.replace("pct_standin", "pct_transfer"))


HANDLERS = {"exec": cmd_exec, "status": cmd_status, "list": cmd_list, "config": cmd_config,
            "start": cmd_start, "stop": cmd_stop, "shutdown": lambda o: cmd_stop(o, clean=True),
            "push": lambda o: _transfer().cmd_push(o), "pull": lambda o: _transfer().cmd_pull(o)}


def usage(out, reason=""):
    text = ""
    if reason:
        text += f"ERROR: {reason}\n"
    text += "USAGE: pct <COMMAND> [ARGS] [OPTIONS]\n"
    for name in sorted(COMMANDS):
        text += f"       {COMMANDS[name][2]}\n"
    text += "       pct help [<extra-args>] [OPTIONS]\n"
    text += "(gpunode lab stand-in for Proxmox VE's pct; other subcommands are not implemented)\n"
    out.write(text)


def main(argv):
    os.environ["PATH"] = "/sbin:/bin:/usr/sbin:/usr/bin"
    if not argv:
        usage(sys.stderr, "no command specified")
        return 255
    cmd = argv[0]
    if cmd == "help":
        usage(sys.stdout)
        return 0
    if cmd not in HANDLERS:
        if cmd in NOT_HERE:
            sys.stderr.write(f"pct stand-in (gpunode lab): `pct {cmd}` is a real pct command that this "
                             "stand-in does not implement\n")
        else:
            usage(sys.stderr, f"unknown command 'pct {cmd}'")
        return 255
    try:
        HANDLERS[cmd](parse(cmd, argv[1:]))
    except Die as exc:
        sys.stdout.flush()
        sys.stderr.write(str(exc))
        return 255
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
