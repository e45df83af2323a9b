"""Running an untrusted Python program in a fresh, limited, isolated process.

:func:`run_python` writes the program to a private temporary folder and starts a fresh
``python -I`` in a new session (the grading process is never forked: subprocess's own
fork-exec only, safe from threads). That child is a small bootstrap (:data:`_BOOTSTRAP`): it
sets up isolation, reports on a private status pipe that it is ready, then forks the
program's process, which sets its resource limits, drops every capability
(``PR_SET_NO_NEW_PRIVS``, an empty bounding set, ``capset`` to zero) and runs the program as
``__main__``; the bootstrap waits for it and reports its exit status and CPU time on the
status pipe. The program never holds that pipe, so nothing it prints or exits with can pass
for the sandbox's report.

Limits (:class:`Limits`), set on the program's process and inherited by its children:

- CPU time: ``RLIMIT_CPU`` (soft ``cpu_s``, hard ``cpu_s + 1``, which is a ``SIGKILL``);
- memory: ``RLIMIT_AS``, the address space (``memory_mb``) of each process, and the sum over
  all of them (below);
- files: ``RLIMIT_FSIZE`` (``disk_mb`` per file; Python ignores ``SIGXFSZ``, so the write
  fails with ``EFBIG``), ``RLIMIT_NOFILE`` (``nofile``), ``RLIMIT_CORE`` 0;
- processes and threads: ``RLIMIT_NPROC`` (``nproc``), only where it counts this sandbox's
  processes alone (below);
- output: at most ``output_kb`` of stdout and stderr together are read; past that the
  sandbox is killed;
- wall clock: ``timeout_s`` from the moment the bootstrap is ready; past that the sandbox's
  process group is killed with ``SIGKILL``.

Isolation, where util-linux ``unshare`` and unprivileged user namespaces are available
(:func:`isolation` probes it once and says what holds):

- a new user, network, mount and PID namespace (``unshare -rnm --pid --fork --kill-child
  --mount-proc``): no network interface but a loopback that is down, so no connection can
  be made, not even to the host's loopback; the bootstrap is the namespace's init, and when
  it ends or is killed the kernel kills every process left in the namespace, also those
  that left the process group (``setsid``); the program runs in a process group of its own,
  so ``killpg(0)`` reaches only it;
- every mount read-only, and fresh size-limited tmpfs on ``/tmp``, ``/var/tmp`` and
  ``/dev/shm`` (``disk_mb`` each, which bounds what many small files can fill); the working
  directory is an empty folder in that ``/tmp``; the host's ``/tmp`` (the program file
  included) is hidden; nothing the program writes survives it, and without capabilities it
  cannot remount anything writable;
- ``RLIMIT_NPROC`` counts the processes of the sandbox's own user namespace (Linux 5.14 and
  later); as root the sandbox's real uid is ``nobody`` (``setpriv --ruid``), since the
  kernel exempts real uid 0 from that limit; file access keeps the effective uid.

- the program's process is under a seccomp filter (x86-64 and arm64): ``socket(AF_UNIX)``
  fails (so no Unix socket of the host is reachable, on a path, bind-mounted or abstract),
  and so do ``io_uring_setup`` (its requests open sockets past seccomp), ``unshare``,
  ``setns`` and ``clone`` with a ``CLONE_NEW*`` flag (``clone3`` is ``ENOSYS``: glibc falls
  back to ``clone``); another syscall ABI (i386, x32) kills the process;
- an IPC and a UTS namespace: no System V IPC with the host, and ``/dev/shm`` is fresh;
- the sandbox's user: as root, where user ``nobody`` can run the interpreter, the whole
  sandbox runs as ``nobody`` (its root is the host's ``nobody``); where it cannot (Python in
  ``/root``), the sandbox's root is the host's root with no capability (real uid ``nobody``),
  and :func:`isolation` says so;
- memory: the bootstrap, the namespace's init, sums the resident memory of all the
  program's processes every :data:`MEMORY_POLL_S` seconds and kills them all past
  ``memory_mb`` (``memory_limit``); ``RLIMIT_AS`` bounds each process in between. The
  sandboxes of one grading process together hold at most :func:`memory_budget` in limits
  (each waits for its share).

Reading is **not** prevented: the program can read every file its effective user can read
outside the hidden temp folders (as root: what root can read). With no network, what it
reads can leave only through its output, of which callers keep a short tail.

The environment is empty but ``PATH``, ``HOME`` and the locale (no variable of the host
reaches the program). Without namespaces (no ``unshare``, or refused by the platform) the
program runs with the same limits but ``RLIMIT_NPROC``, in a new session, an empty temp
folder as its working directory, without capabilities, with no network isolation, writable
wherever its user can write, and a process that calls ``setsid`` can outlive the kill of
the group; :func:`isolation` says so.

One module over 500 lines: the bootstrap is a program text that must not import qualgate,
and the host side that starts, watches and reads it shares its protocol and limits.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field

__all__ = ["Limits", "Run", "cpu_count", "isolation", "memory_budget", "reserve_memory", "run_parallel", "run_python"]

#: What the sandbox can end as (:attr:`Run.status`).
STATUSES = ("exited", "timeout", "output_limit", "memory_limit", "stopped", "sandbox_error")
#: Seconds the bootstrap may take to be ready before the sandbox counts as failed.
STARTUP_S = 30.0
#: Seconds given to read the last output after the program ended.
_DRAIN_S = 1.0
_TAIL = 8192  # bytes of stdout and of stderr kept
_NOBODY = 65534
_NAMESPACES = ["unshare", "-rnmiu", "--pid", "--fork", "--kill-child", "--mount-proc"]
#: Seconds between two sums of the sandbox's resident memory.
MEMORY_POLL_S = 0.01


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed program (see the module docstring)."""

    timeout_s: float = 10.0
    cpu_s: float | None = None  #: default: ``timeout_s``
    memory_mb: int = 1024
    output_kb: int = 1024
    disk_mb: int = 64
    nproc: int = 16
    nofile: int = 64

    def __post_init__(self):
        for name in ("timeout_s", "cpu_s"):
            v = getattr(self, name)
            if v is None and name == "cpu_s":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 3600:
                raise ValueError(f"{name} must be a number of seconds in (0, 3600], got {v!r}")
        for name, low in (("memory_mb", 64), ("output_kb", 1), ("disk_mb", 1), ("nproc", 1), ("nofile", 16)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= 1 << 20:
                raise ValueError(f"{name} must be an int in [{low}, {1 << 20}], got {v!r}")

    @property
    def cpu(self) -> int:
        """The CPU-time limit in whole seconds (at least 1)."""
        return max(1, int(round(self.cpu_s if self.cpu_s is not None else self.timeout_s)))


@dataclass(frozen=True)
class Run:
    """How a sandboxed program ended.

    ``status`` is one of :data:`STATUSES`: ``exited`` (then ``exit_code`` is its exit code,
    negative for a signal, as :attr:`subprocess.Popen.returncode`), ``timeout`` (killed at the
    wall-clock limit), ``output_limit`` (killed when its output passed ``output_kb``) or
    ``sandbox_error`` (the sandbox itself failed; ``error`` says how; the program may not
    have run). ``stdout``/``stderr`` are the last 8 KiB of each (decoded with
    replacement), ``output_bytes`` all that was read; ``cpu_s`` the program's CPU time when
    it exited, ``wall_s`` the time from the ready bootstrap to the end. ``memory_limit``: the
    resident memory of all the program's processes together passed ``memory_mb`` and the
    supervisor killed them all; ``peak_mb`` is the largest sum it saw (``None`` where it did
    not supervise: no namespaces). ``stopped``: the caller's ``stop_fd`` ended the run.
    """

    status: str
    exit_code: int | None = None
    cpu_s: float | None = None
    wall_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    output_bytes: int = 0
    error: str | None = None
    peak_mb: float | None = None
    setup: dict = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        return asdict(self)


# The bootstrap runs in the fresh interpreter (argv[1]: a JSON config). It must not import
# anything of qualgate: it runs from an isolated interpreter, maybe in another namespace.
_BOOTSTRAP = r"""
import json, os, resource, sys
cfg = json.loads(sys.argv[1])
status = cfg["status_fd"]
def report(obj):
    os.write(status, (json.dumps(obj) + "\n").encode())
def isolate(disk_mb):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    def mount(source, target, fstype, flags, data):
        if libc.mount(source, target.encode(), fstype, flags, data) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), target)
    keep = ((os.ST_NOSUID, 2), (os.ST_NODEV, 4), (os.ST_NOEXEC, 8), (os.ST_NOATIME, 1024),
            (os.ST_NODIRATIME, 2048), (os.ST_RELATIME, 1 << 21))
    targets = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            t = line.split()[4]
            for esc, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
                t = t.replace(esc, ch)
            if t not in targets:
                targets.append(t)
    done, failed = [], []
    for t in targets:
        try:
            flags = 1 | 32 | 4096  # MS_RDONLY | MS_REMOUNT | MS_BIND
            have = os.statvfs(t).f_flag
            flags |= sum(ms for st, ms in keep if have & st)
            mount(None, t, None, flags, None)
            done.append(t)
        except OSError:
            failed.append(t)
    tmpfs = []
    for d in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(d) and not os.path.islink(d):
            mount(b"tmpfs", d, b"tmpfs", 2 | 4, b"size=%dm,mode=1777" % disk_mb)
            tmpfs.append(d)
    if "/tmp" not in tmpfs:
        raise OSError("no /tmp to mount a tmpfs on")
    os.mkdir("/tmp/work", 0o700)
    return "/tmp/work", {"read_only": len(done), "read_only_failed": failed, "tmpfs": tmpfs}
try:
    with os.fdopen(cfg["program_fd"], encoding="utf-8") as f:
        source = f.read()
    if cfg["namespaces"]:
        workdir, setup = isolate(cfg["disk_mb"])
    else:
        workdir, setup = cfg["workdir"], {}
    os.chdir(workdir)
    os.environ["HOME"] = workdir
    setup["pid"] = os.getpid()
except Exception as exc:
    report({"error": f"setup failed: {type(exc).__name__}: {exc}"})
    sys.exit(125)
sys.stdout.flush()
sys.stderr.flush()
report({"ready": setup})
def drop_privileges():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    def check(result, what):
        if result != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), what)
    check(libc.prctl(38, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL (absent before Linux 4.3)
    cap = 0
    while libc.prctl(24, cap, 0, 0, 0) == 0:  # PR_CAPBSET_DROP, up to the last capability
        cap += 1
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    check(libc.capset(header, (ctypes.c_uint32 * 6)()), "capset")
def deny_syscalls():
    # seccomp: no AF_UNIX socket (none to the host's sockets, on a path or abstract), no
    # io_uring (it opens sockets past seccomp), no new namespace (unshare, setns, clone with a
    # CLONE_NEW* flag; clone3's flags are out of reach, so ENOSYS: glibc falls back to clone),
    # no other syscall ABI (i386, x32); needs PR_SET_NO_NEW_PRIVS (set before)
    import ctypes, struct
    arch = SECCOMP.get(os.uname().machine)
    if arch is None:
        return False
    audit, nr_socket, nr_unshare, nr_setns, nr_clone, x32 = arch
    allow, kill, eperm, enosys = 0x7FFF0000, 0x80000000, 0x00050001, 0x00050026
    prog = [(0x20, 0, 0, 4), (0x15, 1, 0, audit), (0x06, 0, 0, kill), (0x20, 0, 0, 0)]
    if x32:
        prog.append((0x35, "deny", 0, 0x40000000))
    prog += [
        (0x15, 0, 2, nr_socket), (0x20, 0, 0, 16), (0x15, "deny", "allow", 1),
        (0x15, "deny", 0, 425), (0x15, "deny", 0, nr_unshare), (0x15, "deny", 0, nr_setns),
        (0x15, "enosys", 0, 435), (0x15, 0, "allow", nr_clone), (0x20, 0, 0, 16),
        (0x45, "deny", "allow", 0x7E020000),
    ]
    labels = {"allow": len(prog), "deny": len(prog) + 1, "enosys": len(prog) + 2}
    prog += [(0x06, 0, 0, allow), (0x06, 0, 0, eperm), (0x06, 0, 0, enosys)]
    rel = lambda j, i: labels[j] - i - 1 if isinstance(j, str) else j
    blob = b"".join(struct.pack("HBBI", c, rel(t, i), rel(f, i), k) for i, (c, t, f, k) in enumerate(prog))
    buf = ctypes.create_string_buffer(blob)
    fprog = struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(fprog)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(22, ctypes.c_ulong(2), ctypes.c_void_p(ctypes.addressof(fbuf)), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), "seccomp")
    return True
SECCOMP = {  # machine: AUDIT_ARCH, socket, unshare, setns, clone, x32 syscalls exist
    "x86_64": (0xC000003E, 41, 272, 308, 56, True),
    "aarch64": (0xC00000B7, 198, 97, 268, 220, False),
}
child = os.fork()
if child == 0:
    try:
        if cfg["namespaces"]:  # its own process group: killpg(0) cannot reach the bootstrap's
            os.setpgid(0, 0)
        drop_privileges()
        for name, value in cfg["limits"].items():
            resource.setrlimit(getattr(resource, name), tuple(value))
        if not deny_syscalls() and cfg["require_seccomp"]:
            raise OSError(f"no seccomp filter for machine {os.uname().machine}")
    except Exception as exc:
        report({"error": f"limits failed: {type(exc).__name__}: {exc}"})
        os._exit(125)
    os.close(status)
    del status, report, isolate, drop_privileges, deny_syscalls
    main = {"__name__": "__main__", "__builtins__": __builtins__}
    code = compile(source, "<program>", "exec")
    del source, cfg
    exec(code, main)
    sys.exit(0)
for fd in cfg["pass_fds"]:
    os.close(fd)
def resident(page=os.sysconf("SC_PAGE_SIZE")):
    # the resident memory of every process of the namespace but this one (shared pages count
    # once per process: an overestimate, never an underestimate)
    total = 0
    for name in os.listdir("/proc"):
        if name.isdigit() and name != "1":
            try:
                with open(f"/proc/{name}/statm", "rb") as f:
                    total += int(f.read().split()[1]) * page
            except (OSError, ValueError, IndexError):
                pass
    return total
peak, over = 0, None
if os.getpid() == 1 and cfg["memory_bytes"]:  # the namespace's init: supervise the sum
    import time
    while True:
        pid, st, ru = os.wait4(child, os.WNOHANG)
        if pid:
            break
        total = resident()
        peak = max(peak, total)
        if total > cfg["memory_bytes"]:
            over = total
            os.kill(-1, 9)
            _, st, ru = os.wait4(child, 0)
            break
        time.sleep(0.01)
else:
    _, st, ru = os.wait4(child, 0)
if os.getpid() == 1:  # the namespace's init: end what the program left, then report
    try:
        os.kill(-1, 9)
    except ProcessLookupError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
report({"exit": os.waitstatus_to_exitcode(st), "cpu_s": ru.ru_utime + ru.ru_stime, "peak_bytes": peak, "memory_over": over})
os._exit(0)
"""

_probe_lock = threading.Lock()
_probed: dict | None = None


def _prefix(namespaces: bool) -> list[str]:
    """Commands run before the bootstrap: as root, uid ``nobody`` (the real uid only, where
    ``nobody`` cannot run this interpreter), then the namespaces."""
    if not namespaces:
        return []
    cmd = []
    if os.geteuid() == 0 and shutil.which("setpriv"):
        who = "--reuid={0} --regid={0}" if _nobody_runs_python() else "--ruid={0} --rgid={0}"
        cmd = [shutil.which("setpriv"), *who.format(_NOBODY).split(), "--clear-groups"]
    return cmd + [shutil.which("unshare") or "unshare", *_NAMESPACES[1:]]


_nobody_probe: list = []


def _nobody_runs_python() -> bool:
    """Whether user ``nobody`` can run this interpreter (it cannot where Python lies in a
    folder only root may enter, such as ``/root/.pyenv``): then the sandbox runs as ``nobody``
    (its root is the host's ``nobody``); else its root is the host's root without capabilities."""
    if not _nobody_probe:
        try:
            done = subprocess.run(
                [shutil.which("setpriv") or "setpriv", f"--reuid={_NOBODY}", f"--regid={_NOBODY}", "--clear-groups"]
                + [shutil.which("unshare") or "unshare", "-r", sys.executable, "-I", "-c", "pass"],
                cwd="/",
                env={"PATH": os.defpath},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=30,
            )
            _nobody_probe.append(done.returncode == 0)
        except (OSError, subprocess.SubprocessError):
            _nobody_probe.append(False)
    return _nobody_probe[0]


def _nproc_per_sandbox() -> bool:
    """Whether RLIMIT_NPROC counts one sandbox's processes: in its own user namespace, on
    Linux 5.14 or later (per-namespace counts); elsewhere it counts all processes of the
    real user, which a limit for one program cannot be."""
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 14)


def isolation() -> dict:
    """What the sandbox enforces on this machine, probed once by running a trivial program.

    Returns a dict: ``namespaces`` (bool: user, network, mount, IPC, UTS and PID namespaces
    are in use), ``network``, ``processes``, ``nproc``, ``filesystem``, ``reads``, ``user``,
    ``sockets``, ``ipc``, ``memory`` (one-line statements of what holds), and ``reason`` (why
    namespaces are not in use, or ``None``).
    """
    global _probed
    with _probe_lock:
        if _probed is None:
            _probed = _probe()
        return dict(_probed)


def _probe() -> dict:
    reason, run = None, None
    if shutil.which("unshare") is None:
        reason = "util-linux unshare is not installed"
    else:
        run = _run("print('ok')", Limits(timeout_s=20), namespaces=True)
        if run.status != "exited" or run.exit_code != 0 or run.stdout.strip() != "ok":
            tail = (run.error or run.stderr).strip().splitlines()[-1:] or [run.status]
            reason = f"unshare -rnm --pid failed here: {tail[0][:200]}"
    ns = reason is None
    writable = run.setup.get("read_only_failed") if run is not None and ns else None
    root = os.geteuid() == 0
    as_nobody = ns and root and bool(shutil.which("setpriv")) and _nobody_runs_python()
    filtered = os.uname().machine in ("x86_64", "aarch64")
    if not root:
        user = "the invoking user's (no capabilities)"
    elif as_nobody:
        user = "nobody: the sandbox's root is the host's nobody"
    else:
        user = (
            "the host's root WITHOUT capabilities (real uid nobody): user nobody cannot run "
            f"{sys.executable} (install Python where nobody can read it to run the sandbox as nobody)"
        )
    if not ns:
        nproc = "not enforced: RLIMIT_NPROC would count every process of the user"
    elif not _nproc_per_sandbox():
        nproc = "not enforced: Linux before 5.14 counts RLIMIT_NPROC per user, not per namespace"
    elif root and not shutil.which("setpriv"):
        nproc = "not enforced: real uid root is exempt and setpriv is not installed"
    else:
        nproc = "enforced per sandbox (RLIMIT_NPROC in its user namespace" + (", real uid nobody)" if root else ")")
    return {
        "namespaces": ns,
        "network": "none: a new network namespace with only a loopback that is down"
        if ns
        else "NOT isolated: the program can open network connections",
        "processes": "PID namespace: every process of the program dies with the sandbox"
        if ns
        else "process group: a process that calls setsid can survive the kill",
        "nproc": nproc,
        "filesystem": (
            "read-only, except fresh tmpfs on /tmp, /var/tmp and /dev/shm"
            + (f"; NOT read-only (remount refused): {writable}" if writable else "")
        )
        if ns
        else "NOT isolated: writable wherever the user can write; cwd an empty temp folder",
        "reads": (
            "not prevented: files the sandbox's effective user"
            + (" (root)" if root and not as_nobody else " (nobody)" if as_nobody else "")
            + " can read"
            + (", outside the hidden /tmp, /var/tmp and /dev/shm" if ns else "")
        ),
        "user": user,
        "sockets": "no Unix socket (seccomp refuses socket(AF_UNIX)), no io_uring, no new namespace"
        if filtered
        else f"NOT filtered: no seccomp filter for machine {os.uname().machine}",
        "ipc": "a new IPC namespace (no System V IPC with the host); fresh /dev/shm"
        if ns
        else "NOT isolated: System V IPC and /dev/shm are the host's",
        "memory": (
            "all the program's processes together: their resident memory summed every "
            f"{MEMORY_POLL_S * 1000:g} ms, all killed past memory_mb (a burst between two sums is bounded by "
            "RLIMIT_AS, memory_mb per process); the sandboxes of this process together hold at most "
            f"memory_budget() = {memory_budget()} MiB in limits"
        )
        if ns
        else "per process only (RLIMIT_AS): no sum over the program's processes without a PID namespace",
        "reason": reason,
    }


def run_python(
    source: str,
    limits: Limits | None = None,
    *,
    isolate: bool | None = None,
    pass_fds: tuple[int, ...] = (),
    stop_fd: int | None = None,
    budget: bool = True,
) -> Run:
    """Run the Python program ``source`` in a sandbox and return how it ended.

    ``isolate``: ``None`` (default) uses namespaces where :func:`isolation` found them
    working; ``True`` demands them (a ``sandbox_error`` where they are not available);
    ``False`` runs without them (limits, new session and temp working directory only).
    ``pass_fds``: file descriptors the program keeps (pipes of a channel), closed in this
    process once the sandbox has started (or failed to). ``stop_fd``: when it becomes readable
    (data or end of file) the sandbox is killed and the run is ``stopped``. ``budget``: wait
    for ``limits.memory_mb`` of the grading memory budget (:func:`memory_budget`) first;
    ``False`` when the caller reserved it (:func:`reserve_memory`).
    Never raises for anything the program does; a failure of the sandbox itself is a
    ``sandbox_error`` run.
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be a str, got {type(source).__name__}")
    limits = limits or Limits()
    pass_fds = list(pass_fds)  # emptied by whoever closes them first
    try:
        if isolate is None or isolate:
            available = isolation()["namespaces"]
            if isolate and not available:
                return Run("sandbox_error", error=f"namespaces unavailable: {isolation()['reason']}")
            isolate = available
        if not budget:
            return _run(source, limits, namespaces=isolate, pass_fds=pass_fds, stop_fd=stop_fd)
        with reserve_memory(limits.memory_mb):
            return _run(source, limits, namespaces=isolate, pass_fds=pass_fds, stop_fd=stop_fd)
    finally:
        _close(pass_fds)


def _close(fds: list) -> None:
    """Close each fd of ``fds`` and empty the list (so that no fd is closed twice: its number
    may be another thread's by then)."""
    while fds:
        try:
            os.close(fds.pop())
        except OSError:
            pass


def _run(source: str, limits: Limits, *, namespaces: bool, pass_fds: list | None = None, stop_fd=None) -> Run:
    pass_fds = [] if pass_fds is None else pass_fds
    try:
        tmp = tempfile.mkdtemp(prefix="qualgate-sandbox-")
    except OSError as exc:
        return Run("sandbox_error", error=f"cannot create a temp folder: {exc}")
    try:
        return _run_in(tmp, source, limits, namespaces, pass_fds, stop_fd)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run_in(tmp: str, source: str, limits: Limits, namespaces: bool, pass_fds: list, stop_fd=None) -> Run:
    program, workdir = os.path.join(tmp, "program.py"), os.path.join(tmp, "work")
    os.mkdir(workdir, 0o700)
    try:  # handed over open: the sandbox's user (nobody, as root) cannot open the private folder
        with open(program, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(source)
        program_fd = os.open(program, os.O_RDONLY)
    except OSError as exc:
        _close(pass_fds)
        return Run("sandbox_error", error=f"cannot write the program: {exc}")
    mb = 1 << 20
    rlimits = {
        "RLIMIT_CPU": [limits.cpu, limits.cpu + 1],
        "RLIMIT_AS": [limits.memory_mb * mb] * 2,
        "RLIMIT_FSIZE": [limits.disk_mb * mb] * 2,
        "RLIMIT_NOFILE": [limits.nofile] * 2,
        "RLIMIT_CORE": [0, 0],
    }
    if namespaces and _nproc_per_sandbox():
        rlimits["RLIMIT_NPROC"] = [limits.nproc] * 2
    status_r, status_w = os.pipe()
    cfg = {
        "status_fd": status_w,
        "program_fd": program_fd,
        "pass_fds": list(pass_fds),
        "workdir": workdir,
        "namespaces": namespaces,
        "disk_mb": limits.disk_mb,
        "limits": rlimits,
        "memory_bytes": limits.memory_mb * mb if namespaces else 0,
        "require_seccomp": namespaces,
    }
    cmd = _prefix(namespaces) + [sys.executable, "-I", "-c", _BOOTSTRAP, json.dumps(cfg)]
    env = {"PATH": os.defpath, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": workdir}
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(status_w, program_fd, *pass_fds),
            cwd=workdir,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        os.close(status_r)
        return Run("sandbox_error", error=f"cannot start the sandbox: {exc}")
    finally:
        _close([status_w, program_fd])
        _close(pass_fds)
    try:
        return _watch(proc, status_r, limits, stop_fd)
    finally:
        _kill_group(proc)
        os.close(status_r)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the sandbox's process group, then reap its leader (never the other order: a
    reaped leader's pid, and so the group id, may be reused)."""
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    # Every process of the sandbox holds these pipes: their end means all of them are gone
    # (a PID namespace dies a moment after its init). Bounded: in a run without namespaces a
    # process that left the group may hold them.
    sel = selectors.DefaultSelector()
    for stream in (proc.stdout, proc.stderr):
        if not stream.closed:
            sel.register(stream, selectors.EVENT_READ)
    deadline = time.monotonic() + _DRAIN_S
    while sel.get_map() and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=max(0.0, deadline - time.monotonic())):
            if not os.read(key.fileobj.fileno(), 65536):
                sel.unregister(key.fileobj)
    sel.close()
    for stream in (proc.stdout, proc.stderr):
        stream.close()


def _watch(proc: subprocess.Popen, status_r: int, limits: Limits, stop_fd: int | None = None) -> Run:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    sel.register(status_r, selectors.EVENT_READ, "status")
    if stop_fd is not None:
        sel.register(stop_fd, selectors.EVENT_READ, "stop")
    tails = {"stdout": bytearray(), "stderr": bytearray()}
    status_buf = bytearray()
    cap, total = limits.output_kb * 1024, 0
    started = time.monotonic()
    deadline = started + STARTUP_S
    ready_at = final = setup = error = None
    ended = None  # why the watch stopped early
    while sel.get_map():
        now = time.monotonic()
        if now >= deadline:
            if final is not None:
                break
            ended = "timeout" if ready_at is not None else "startup"
            break
        for key, _ in sel.select(timeout=deadline - now):
            if key.data == "stop":
                ended = "stopped"
                break
            fd = key.fileobj if isinstance(key.fileobj, int) else key.fileobj.fileno()
            chunk = os.read(fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            if key.data == "status":
                status_buf += chunk
                while b"\n" in status_buf:
                    line, _, rest = bytes(status_buf).partition(b"\n")
                    status_buf[:] = rest
                    msg = json.loads(line)
                    if "ready" in msg:
                        setup, ready_at = msg["ready"], time.monotonic()
                        deadline = ready_at + limits.timeout_s
                    elif "error" in msg:
                        error = msg["error"]
                    else:
                        final = msg
                        deadline = min(deadline, time.monotonic() + _DRAIN_S)
                continue
            total += len(chunk)
            tail = tails[key.data]
            tail += chunk
            del tail[:-_TAIL]
            if total > cap:
                ended = "output"
                break
        if ended:
            break
    wall = time.monotonic() - (ready_at or started)
    mb = 1 << 20
    _kill_group(proc)
    out = {k: v.decode("utf-8", "replace") for k, v in tails.items()}
    common = dict(wall_s=wall, output_bytes=total, setup=setup or {}, **out)
    if error is not None:
        return Run("sandbox_error", error=error, **common)
    if ended == "output" and ready_at is not None:
        return Run("output_limit", **common)
    if ended == "timeout":
        return Run("timeout", **common)
    if final is not None:
        common |= dict(exit_code=int(final["exit"]), cpu_s=float(final["cpu_s"]), peak_mb=final["peak_bytes"] / mb)
        return Run("memory_limit" if final.get("memory_over") else "exited", **common)
    if ended == "stopped":
        return Run("stopped", **common)
    if ended == "startup":
        error = f"the sandbox did not start within {STARTUP_S:g} s"
    else:
        last = out["stderr"].strip().splitlines()[-1:] or [""]
        error = f"the sandbox ended without a report (exit code {proc.returncode}) {last[0][:200]}"
    return Run("sandbox_error", error=error.strip(), **common)


class _Budget:
    """Megabytes of sandbox memory limits granted at once, across all threads of this process."""

    def __init__(self):
        self.cond = threading.Condition()
        self.used = 0
        self.total: int | None = None

    def limit(self) -> int:
        if self.total is None:
            self.total = _default_budget_mb()
        return self.total


_budget = _Budget()


def _default_budget_mb() -> int:
    """Half of the machine's memory (``/proc/meminfo``'s MemTotal), at least 1024 MiB."""
    try:
        with open("/proc/meminfo") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return 4096
    return max(1024, kib // 1024 // 2)


def memory_budget(mb: int | None = None) -> int:
    """The memory all sandboxes of this process may hold at once (MiB), set to ``mb`` when given.

    Each sandbox waits until its ``memory_mb`` fits in what the running ones leave (a limit
    larger than the whole budget runs alone), so the grading workers together never hold more
    than the budget in limits. Default: half of the machine's memory.
    """
    if mb is not None:
        if isinstance(mb, bool) or not isinstance(mb, int) or mb < 64:
            raise ValueError(f"the memory budget must be an int of at least 64 MiB, got {mb!r}")
        with _budget.cond:
            _budget.total = mb
            _budget.cond.notify_all()
    return _budget.limit()


class reserve_memory:  # noqa: N801 (a context manager, used as a function)
    """``with reserve_memory(mb):`` holds ``mb`` of the budget (:func:`memory_budget`),
    waiting until it is free; ``mb`` larger than the budget waits until nothing else runs."""

    def __init__(self, mb: int):
        self.mb = mb

    def __enter__(self):
        with _budget.cond:
            self.held = min(self.mb, _budget.limit())
            _budget.cond.wait_for(lambda: _budget.used + self.held <= _budget.limit())
            _budget.used += self.held
        return self

    def __exit__(self, *exc):
        with _budget.cond:
            _budget.used -= self.held
            _budget.cond.notify_all()


def cpu_count() -> int:
    """CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def run_parallel(fn, items, *, workers: int | None = None) -> list:
    """``[fn(item) for item in items]`` with at most ``workers`` calls at once (default: the
    CPU count), for grading many programs: each call waits on its own sandbox process."""
    from concurrent.futures import ThreadPoolExecutor

    items = list(items)
    workers = cpu_count() if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    if workers == 1 or len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(fn, items))
