# STAND-IN for Proxmox VE's `pct push` / `pct pull` (pve-container, src/PVE/CLI/pct.pm), part
# of the gpunode lab's pct stand-in (pct_standin.py has the CLI and the rest). It is NOT
# Proxmox. Like real pct, it takes the container's config lock and opens the file inside the
# container's mount namespace (setns), so symlinks cannot lead out of the container, and
# creates pushed files with explicit perms and the container's user/group names.
#
# Loaded only by push and pull, so that `pct exec` keeps starting fast.

import importlib
import os

# The CLI module beside this one: gpunode_lab.pct_standin in the repository,
# gpunode_pct_standin where the lab installs it.
core = importlib.import_module(__name__.replace("pct_transfer", "pct_standin"))


def parse_owner(user, group):
    import grp
    import pwd

    uid = gid = None
    if user is not None:
        if user.isdigit():
            uid = int(user)
        else:
            try:
                uid = pwd.getpwnam(user).pw_uid
            except KeyError:
                core.die(f"failed to get uid for: {user}\n")
    if group is not None:
        if group.isdigit():
            gid = int(group)
        else:
            try:
                gid = grp.getgrnam(group).gr_gid
            except KeyError:
                core.die(f"failed to get gid for: {group}\n")
    return uid, gid


def parse_perms(perms):
    if perms is None:
        return None
    if not perms.startswith("0"):
        perms = "0" + perms  # assume octal as default
    try:
        if perms.lower().startswith("0x"):
            return int(perms[2:], 16)
        return int(perms, 8)
    except ValueError:
        core.die(f"invalid mode: '{perms}'\n")


def create_file(path, perms, user, group):
    """pct.pm create_file: explicit perms (not umask), ownership by name or id."""
    uid, gid = parse_owner(user, group)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0)
        if perms is None:
            umask = os.umask(0)
            os.umask(umask)
            perms = 0o666 & ~umask
    except FileExistsError:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        except OSError as exc:
            core.die(f"failed to create file: {path}: {exc.strerror}\n")
    except OSError as exc:
        core.die(f"failed to create file: {path}: {exc.strerror}\n")
    if perms is not None:
        os.fchmod(fd, perms)
    if uid is not None or gid is not None:
        st = os.fstat(fd)
        try:
            os.fchown(fd, st.st_uid if uid is None else uid, st.st_gid if gid is None else gid)
        except OSError as exc:
            core.die(f"failed to change file owner: {exc.strerror}\n")
    return fd


def copy_fd(src, dst):
    while True:
        chunk = os.read(src, 1 << 20)
        if not chunk:
            return
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view):]


def enter_mount_ns(pid):
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    try:
        nsfd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
    except OSError:
        core.die("failed to open the container's mount namespace\n")
    if libc.setns(nsfd, 0x00020000) != 0:  # CLONE_NEWNS
        core.die("failed to enter the container's mount namespace\n")
    os.close(nsfd)
    os.chdir("/")


def with_lock(vmid, code):
    """PVE::LXC::Config->lock_config: flock on the container's config lock file (10 s)."""
    import fcntl
    import time

    os.makedirs(core.LOCK_DIR, exist_ok=True)
    fd = os.open(f"{core.LOCK_DIR}/pve-config-{vmid}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + 10
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                core.die(f"can't lock file '{core.LOCK_DIR}/pve-config-{vmid}.lock' - got timeout\n")
            time.sleep(0.05)
    try:
        return code()
    finally:
        os.close(fd)


def in_child(work):
    """Run work() in a forked child (it enters another mount namespace); die with its message."""
    import ctypes  # noqa: F401 - loaded before the fork: the container has no host libraries
    import grp  # noqa: F401
    import pwd  # noqa: F401

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            work()
        except core.Die as exc:
            os.write(w, str(exc).encode())
            code = 255
        except BaseException as exc:  # noqa: BLE001 - reported by the parent
            os.write(w, (f"{exc}\n").encode())
            code = 255
        os._exit(code)
    os.close(w)
    msg = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        msg += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        core.die(msg.decode("utf-8", "replace") or "worker failed\n")


def cmd_push(o):
    vmid, src, dest = o["vmid"], o["file"], o["destination"]
    perms = parse_perms(o.get("perms"))

    def locked():
        if not core.check_running(vmid):
            core.die("can only push files to a running CT\n")
        core.load_config(vmid)
        pid = core.find_lxc_pid(vmid)
        try:
            srcfd = os.open(src, os.O_RDONLY)
        except OSError:
            core.die(f"failed to open {src} for reading\n")

        def work():
            enter_mount_ns(pid)
            destfd = create_file(dest, perms, o.get("user"), o.get("group"))
            copy_fd(srcfd, destfd)
            os.close(destfd)

        in_child(work)

    with_lock(vmid, locked)


def cmd_pull(o):
    vmid, path, dest = o["vmid"], o["path"], o["destination"]
    perms = parse_perms(o.get("perms"))

    def locked():
        if not core.check_running(vmid):
            core.die(f"can only pull files from a running VM at {core.PCT_PM} line 664.\n")
        pid = core.find_lxc_pid(vmid)
        destfd = create_file(dest, perms, o.get("user"), o.get("group"))

        def work():
            enter_mount_ns(pid)
            try:
                srcfd = os.open(path, os.O_RDONLY)
            except OSError as exc:
                core.die(f"failed to open {path}: {exc.strerror}\n")
            copy_fd(srcfd, destfd)

        in_child(work)

    with_lock(vmid, locked)
