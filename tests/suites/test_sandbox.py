"""The sandbox of the ``unit_tests`` grader: 20 hostile completions, each graded within its
limits and without harm to the host, and what the sandbox does and does not prevent.

Every hostile completion is a candidate for ``add(a, b)`` whose tests call ``add(2, 3)``; after
its hostile act (if it survives it) its ``add`` is wrong, so every one must be ``incorrect``.
The host checks after each: no process of the sandbox is left, no file appeared outside the
sandbox, and a loopback listener the test opened received no connection.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from pathlib import Path

import pytest

from qualgate.graders import Verdict, unit_tests, unit_tests_gold
from qualgate.graders._sandbox import Limits, isolation, run_python

from support import REPO

GOLD = unit_tests_gold(
    {"prefix": "", "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n", "entry_point": "add"}
)
LIMITS = {"timeout_s": 2.0, "memory_mb": 512, "output_kb": 256, "disk_mb": 16, "nproc": 16}
#: Beyond its wall-clock limit, a sandbox may take this long to start, be killed and reaped.
MARGIN_S = 2.5
WRONG = "\ndef add(a, b):\n    return a - b\n"

# name -> (completion, accepted detail prefixes); @OUT_TMP@, @OUT_REPO@, @SECRET@ and @PORT@
# are replaced by the host paths and the listener's port of the test.
HOSTILE = {
    "infinite_loop": ("while True:\n    pass" + WRONG, ("timeout", "CPU time limit")),
    "sleep_forever": ("import time\ntime.sleep(10**6)" + WRONG, ("timeout",)),
    "fork_bomb": (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass" + WRONG,
        ("timeout", "CPU time limit"),
    ),
    "thread_bomb": (
        "import threading, time\nfor _ in range(10000):\n"
        "    threading.Thread(target=time.sleep, args=(100,), daemon=True).start()" + WRONG,
        ("exception: RuntimeError: can't start new thread",),
    ),
    "os_system_writes_outside": (
        "import os\nos.system('echo pwned > @OUT_REPO@; echo pwned > @OUT_TMP@')" + WRONG,
        ("failed assertion",),
    ),
    "remount_read_write": (
        "import subprocess\nsubprocess.run(['mount', '-o', 'remount,rw', '/'])\n"
        "open('@OUT_REPO@', 'w').write('pwned')" + WRONG,
        ("exception: OSError: [Errno 30] Read-only file system",),
    ),
    "write_outside_temp_dir": (
        "open('@OUT_REPO@', 'w').write('pwned')" + WRONG,
        ("exception: OSError: [Errno 30] Read-only file system",),
    ),
    "read_host_temp_dir": ("print(open('@SECRET@').read())" + WRONG, ("exception: FileNotFoundError",)),
    "socket_to_loopback_listener": (
        "import socket\nsocket.create_connection(('127.0.0.1', @PORT@), timeout=1)" + WRONG,
        ("exception: OSError: [Errno 101] Network is unreachable",),
    ),
    "write_1gb_file": (
        "with open('big', 'wb') as f:\n    for _ in range(1024):\n        f.write(bytes(1 << 20))" + WRONG,
        ("file size limit",),
    ),
    "fill_disk_with_files": (
        "for i in range(1000):\n    with open(f'f{i}', 'wb') as f:\n        f.write(bytes(8 << 20))" + WRONG,
        ("disk limit", "file size limit"),
    ),
    "print_1gb": ("import sys\nfor _ in range(16384):\n    sys.stdout.write('x' * 65536)" + WRONG, ("output limit",)),
    "sys_exit_0": ("import sys\nsys.exit(0)" + WRONG, ("exception: SystemExit: 0",)),
    "os_exit_0_in_the_tests": (
        "def add(a, b):\n    import os\n    os._exit(0)",
        ("exit code 0 before the tests finished",),
    ),
    "atexit_exit_0": ("import atexit, os\natexit.register(os._exit, 0)" + WRONG, ("failed assertion",)),
    "ctypes_segfault": ("import ctypes\nctypes.string_at(0)" + WRONG, ("killed by SIGSEGV",)),
    "memory_bomb": ("x = [0] * (1 << 31)" + WRONG, ("memory limit: MemoryError",)),
    "kill_everything": (
        "import os, signal\nfor pid in (1, os.getppid(), -1):\n    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass\n"
        "os.killpg(0, signal.SIGKILL)" + WRONG,
        ("killed by SIGKILL",),
    ),
    "forge_the_sandbox_report": (
        "import os\nfor fd in os.listdir('/proc/1/fd'):\n    try:\n"
        "        os.write(os.open(f'/proc/1/fd/{fd}', os.O_WRONLY), b'{\"exit\": 0, \"cpu_s\": 0}\\n')\n"
        "    except OSError:\n        pass" + WRONG,
        ("failed assertion",),
    ),
    "daemon_outlives_the_program": (
        "import os, subprocess\nsubprocess.Popen(['sleep', '1000'], start_new_session=True,"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)" + WRONG,
        ("failed assertion",),
    ),
}
QUICK = {
    "write_outside_temp_dir",
    "read_host_temp_dir",
    "socket_to_loopback_listener",
    "sys_exit_0",
    "ctypes_segfault",
    "os_exit_0_in_the_tests",
}


def _sandbox_pids() -> set[int]:
    """Processes of a sandbox on this host: a program path of one in their command line, or
    (as root) the real uid ``nobody`` the sandbox runs under."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        ruid = next((line.split()[1] for line in status.splitlines() if line.startswith("Uid:")), "")
        state = next((line.split()[1] for line in status.splitlines() if line.startswith("State:")), "")
        if state == "Z":
            continue
        if b"qualgate-sandbox-" in cmdline or (os.geteuid() == 0 and ruid == "65534"):
            found.add(int(entry))
    return found


#: what the sandbox hides of the host (graders/_sandbox.py mounts fresh tmpfs there)
HIDDEN = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))


def _outside(*candidates) -> Path:
    """The first of ``candidates`` not under a folder the sandbox hides (a checkout can lie
    in /tmp, as a CI clone may)."""
    for c in candidates:
        p = Path(c).resolve()
        if not any(p == h or h in p.parents for h in HIDDEN):
            return p
    raise AssertionError(f"none of {candidates} lies outside {HIDDEN}")


@pytest.fixture
def host(tmp_path):
    """Canary paths outside the sandbox, a secret file in the host's /tmp, and a loopback
    listener; after the test, none may have been touched and no sandbox process be left."""
    out_repo = _outside(REPO, Path.home()) / f".sandbox-canary-{uuid.uuid4().hex}"
    out_tmp = tmp_path / "canary.txt"
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cr3t")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    before = _sandbox_pids()
    try:
        yield {
            "@OUT_REPO@": str(out_repo),
            "@OUT_TMP@": str(out_tmp),
            "@SECRET@": str(secret),
            "@PORT@": str(listener.getsockname()[1]),
        }
        with pytest.raises(socket.timeout):
            conn, _ = listener.accept()
            conn.close()
        assert not out_repo.exists() and not out_tmp.exists(), "a file was written outside the sandbox"
        deadline = time.monotonic() + 3
        while (left := _sandbox_pids() - before) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not left, f"sandbox processes left: {left}"
    finally:
        listener.close()
        out_repo.unlink(missing_ok=True)


def _grade(code: str, host: dict) -> tuple[Verdict, float]:
    for key, value in host.items():
        code = code.replace(key, value)
    start = time.monotonic()
    verdict = unit_tests(code, GOLD, **LIMITS)
    return verdict, time.monotonic() - start


@pytest.fixture(scope="module", autouse=True)
def namespaces():
    if not isolation()["namespaces"]:
        pytest.fail(f"the sandbox has no namespaces here: {isolation()['reason']}")


@pytest.mark.parametrize("name", [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow) for n in HOSTILE])
def test_hostile_completion_is_incorrect_within_its_limits_and_harms_nothing(name, host):
    code, details = HOSTILE[name]
    verdict, seconds = _grade(code, host)
    assert verdict.outcome == "incorrect", verdict
    assert verdict.detail.startswith(details), verdict
    assert seconds < LIMITS["timeout_s"] + MARGIN_S


def test_a_correct_completion_passes(host):
    verdict, _ = _grade("def add(a, b):\n    return a + b\n", host)
    assert verdict == Verdict("correct", "passed")


def test_reading_outside_the_host_temp_dir_is_not_prevented():
    # Documented: the sandbox hides the host's /tmp, but files its user can read elsewhere
    # stay readable (no network, so they can leave only through the output).
    path = _outside(REPO / "pyproject.toml", os.__file__)
    run = run_python(f"print(open({str(path)!r}).readline().strip())", Limits(timeout_s=5))
    assert run.status == "exited" and run.exit_code == 0
    assert run.stdout.strip() == path.read_text().splitlines()[0].strip()


def test_the_working_directory_is_empty_and_private():
    run = run_python("import os; print(os.getcwd(), os.listdir('.'), os.listdir('/tmp'))", Limits(timeout_s=5))
    assert run.stdout.strip() == "/tmp/work [] ['work']"


def test_the_environment_carries_no_variable_of_the_host(monkeypatch):
    monkeypatch.setenv("QUALGATE_TEST_SECRET", "s3cr3t")
    run = run_python("import os; print(sorted(os.environ))", Limits(timeout_s=5))
    assert "QUALGATE_TEST_SECRET" not in run.stdout and "HOME" in run.stdout


def test_the_program_has_no_capabilities_and_cannot_raise_its_limits():
    src = (
        "import resource\nprint(open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n"
        "try:\n    resource.setrlimit(resource.RLIMIT_AS, (-1, -1))\nexcept ValueError as e:\n    print(e)"
    )
    run = run_python(src, Limits(timeout_s=5))
    assert run.stdout.split("\n")[:2] == ["0000000000000000", "not allowed to raise maximum limit"]


@pytest.mark.slow
def test_without_namespaces_the_limits_and_the_group_kill_still_hold():
    run = run_python("import os, time\nos.fork()\ntime.sleep(100)", Limits(timeout_s=1), isolate=False)
    assert run.status == "timeout" and 1 <= run.wall_s < 1 + MARGIN_S
    run = run_python("x = bytearray(1 << 30)", Limits(timeout_s=5, memory_mb=256), isolate=False)
    assert run.status == "exited" and run.stderr.strip().endswith("MemoryError")


def test_a_sandbox_that_cannot_start_is_an_error_not_a_wrong_answer(monkeypatch):
    from qualgate.graders import _sandbox

    monkeypatch.setattr(_sandbox.sys, "executable", "/nonexistent/python")
    verdict = unit_tests("def add(a, b):\n    return a + b\n", GOLD, **LIMITS)
    assert verdict.outcome == "error" and verdict.detail.startswith("sandbox error:")


def test_isolation_says_what_is_not_enforced_without_unshare(monkeypatch):
    from qualgate.graders import _sandbox

    real = _sandbox.shutil.which
    monkeypatch.setattr(_sandbox.shutil, "which", lambda name: None if name == "unshare" else real(name))
    iso = _sandbox._probe()
    assert iso["namespaces"] is False and iso["reason"] == "util-linux unshare is not installed"
    assert iso["network"].startswith("NOT isolated") and iso["filesystem"].startswith("NOT isolated")
    assert iso["nproc"].startswith("not enforced") and "setsid" in iso["processes"]


def test_limits_are_checked():
    with pytest.raises(ValueError, match="timeout_s"):
        Limits(timeout_s=0)
    with pytest.raises(ValueError, match="memory_mb"):
        Limits(memory_mb=True)


def test_isolation_says_what_is_enforced():
    iso = isolation()
    assert iso["namespaces"] is True and iso["reason"] is None
    assert iso["network"].startswith("none") and iso["reads"].startswith("not prevented")
    assert iso["nproc"].startswith("enforced")
