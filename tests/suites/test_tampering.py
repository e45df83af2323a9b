"""Completions written to defeat the ``unit_tests`` grader: each one graded ``incorrect``.

The gold is a HumanEval-style question (a prefix with the signature, a ``check`` of three
asserts); every completion below has a wrong ``add`` (or none) and tries to pass anyway: the
four techniques of issue 48 (patching builtins, the caller's frame, ``gc``, an object equal to
everything) and 22 more. The tests run in another process than the completion and read only
plain data from it (``qualgate/graders/_code.py``), so none of them can work. Also here: the
Unix sockets (on a path and abstract) and the memory of several processes are contained.
"""

from __future__ import annotations

import os
import socket
import uuid

import pytest

from qualgate.graders import unit_tests, unit_tests_gold
from qualgate.graders._sandbox import Limits, isolation, run_python

from support import REPO

GOLD = unit_tests_gold(
    {
        "prefix": 'def add(a, b):\n    """Return a + b."""\n',
        "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(1, 1) == 2\n"
        "    assert candidate(-4, 4) == 0\n",
        "entry_point": "add",
    }
)
LIMITS = {"timeout_s": 3.0, "memory_mb": 512, "output_kb": 256, "disk_mb": 16, "nproc": 16}
WRONG = "\ndef add(a, b):\n    return a - b\n"
FORGE = (  # write a passing verdict and answers on every descriptor the process holds
    "import os\nfor _fd in range(3, 256):\n    for _line in (b'{\"passed\": true}\\n', b'{\"return\": 5}\\n'):\n"
    "        try:\n            os.write(_fd, _line)\n        except OSError:\n            pass\n"
)

TAMPERING = {
    # the four of issue 48
    "patch_builtins_compile_and_exec": (
        "import builtins\n_c, _e = builtins.compile, builtins.exec\n"
        "builtins.compile = lambda src, name, mode, *a, **k: _c('pass', name, mode)\n"
        "builtins.exec = lambda *a, **k: None\n" + WRONG
    ),
    "marker_from_the_callers_frame": (
        "import os, sys\nf = sys._getframe(0)\nwhile f is not None:\n"
        "    for v in list(f.f_locals.values()) + list(f.f_globals.values()):\n"
        "        if isinstance(v, str) and v.startswith('qualgate'):\n"
        "            print(v)\n            sys.stdout.flush()\n            os._exit(0)\n"
        "    f = f.f_back\n" + WRONG
    ),
    "marker_through_gc": (
        "import gc, os, sys\nfor o in gc.get_objects():\n    if isinstance(o, dict):\n"
        "        for v in list(o.values()):\n            if isinstance(v, str) and 'passed' in v:\n"
        "                print(v)\nsys.stdout.flush()\nos._exit(0)\n" + WRONG
    ),
    "object_equal_to_everything": (
        "class E:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n"
        "def add(a, b):\n    return E()\n"
    ),
    # 22 more
    "int_subclass_equal_to_everything": (
        "class I(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return I(0)\n"
    ),
    "str_subclass_equal_to_everything": (
        "class S(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n"
        "def add(a, b):\n    return S('x')\n"
    ),
    "list_subclass_equal_to_everything": (
        "class L(list):\n    def __eq__(self, other):\n        return True\n\ndef add(a, b):\n    return L()\n"
    ),
    "object_claiming_to_be_int": (
        "class F:\n    __class__ = int\n    def __eq__(self, other):\n        return True\n"
        "def add(a, b):\n    return F()\n"
    ),
    "patch_int_eq_through_ctypes_free_path": (
        "import builtins\nclass T(type):\n    pass\nbuiltins.int = type('int', (int,), {'__eq__': lambda s, o: True})\n"
        + WRONG
    ),
    "forge_the_verdict_channel_on_import": FORGE + WRONG,
    "forge_the_verdict_channel_in_the_call": (
        "def add(a, b):\n" + "".join("    " + line + "\n" for line in FORGE.splitlines()) + "    return 0\n"
    ),
    "hijack_sys_modules_json": (
        "import sys, types\nfake = types.ModuleType('json')\nfake.dumps = lambda *a, **k: '{\"passed\": true}'\n"
        "fake.loads = lambda *a, **k: {'call': 'add', 'args': [], 'kwargs': {}}\nsys.modules['json'] = fake\n" + WRONG
    ),
    "patch_the_server_to_answer_everything": (
        "import gc\nfor o in gc.get_objects():\n    if callable(o) and getattr(o, '__name__', '') == '_qg_enc':\n"
        "        o.__code__ = (lambda v, depth=0: 5).__code__\n" + WRONG
    ),
    "replace_the_driver_by_name": (
        "import sys\ng = sys._getframe(1).f_globals\n"
        "g['_qualgate_drive'] = lambda *a, **k: print('{\"passed\": true}')\n" + WRONG
    ),
    "signal_handler_exits_zero": (
        "import os, signal\nsignal.signal(signal.SIGALRM, lambda *a: os._exit(0))\nsignal.setitimer(signal.ITIMER_REAL, 0.01)\n"
        + WRONG
    ),
    "sigterm_handler_exits_zero": (
        "import os, signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
        "    signal.signal(s, lambda *a: os._exit(0))\n" + WRONG
    ),
    "atexit_forges_the_verdict": (
        "import atexit\ndef _forge():\n" + "".join("    " + line + "\n" for line in FORGE.splitlines()) + "\n"
        "atexit.register(_forge)\nimport sys\nsys.exit(0)\n" + WRONG
    ),
    "thread_forges_after_the_return": (
        "import threading, time\ndef _later():\n    time.sleep(0.05)\n"
        + "".join("    " + line + "\n" for line in FORGE.splitlines())
        + "\ndef add(a, b):\n    threading.Thread(target=_later).start()\n    return a - b\n"
    ),
    "thread_mutates_the_result_after_the_return": (
        "import threading, time\ndef add(a, b):\n    out = [a - b]\n"
        "    threading.Thread(target=lambda: (time.sleep(0.01), out.__setitem__(0, a + b))).start()\n"
        "    return out[0] if False else out\n"
    ),
    "os_exit_zero_in_the_call": "def add(a, b):\n    import os\n    os._exit(0)\n",
    "raise_system_exit_zero_in_the_call": "def add(a, b):\n    raise SystemExit(0)\n",
    "kill_every_process_it_can_see": (
        "import os, signal\nfor pid in range(1, 4096):\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError:\n        pass\n" + WRONG
    ),
    "answer_larger_than_the_reply_limit": "def add(a, b):\n    return 'x' * (17 << 20)\n",
    "answer_nested_past_the_decoder": (
        "def add(a, b):\n    v = []\n    for _ in range(100000):\n        v = [v]\n    return v\n"
    ),
    "exception_pretending_to_be_a_pass": (
        "class AssertionError(Exception):\n    pass\ndef add(a, b):\n    raise AssertionError('passed')\n"
    ),
    "redefine_the_helper_the_tests_trust": ("def add(a, b):\n    return a - b\ncheck = lambda candidate: None\n"),
}


@pytest.fixture(scope="module", autouse=True)
def namespaces():
    if not isolation()["namespaces"]:
        pytest.fail(f"the sandbox has no namespaces here: {isolation()['reason']}")


def test_the_four_techniques_of_the_issue_and_twenty_two_more_are_listed():
    assert len(TAMPERING) == 4 + 22


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TAMPERING))
def test_a_tampering_completion_is_graded_incorrect(name):
    verdict = unit_tests(TAMPERING[name], GOLD, **LIMITS)
    assert verdict.outcome == "incorrect", (name, verdict)
    assert len(verdict.detail) <= 200


def test_the_right_function_still_passes():
    assert unit_tests("def add(a, b):\n    return a + b\n", GOLD, **LIMITS).outcome == "correct"


def test_nothing_of_the_tests_is_in_the_completions_process():
    # add is right only when no string of the tests (their text, a marker) is in its process
    probe = (
        "import gc\ndef add(a, b):\n    seen = any(isinstance(o, str) and ('candidate(2, 3)' in o or "
        "'passed' in o) for o in gc.get_objects())\n    return a + b + (100 if seen else 0)\n"
    )
    assert unit_tests(probe, GOLD, **LIMITS).outcome == "correct"


def test_the_detail_withholds_what_the_completion_read_from_the_host():
    secret = "/etc/passwd" if os.path.exists("/etc/passwd") else str(REPO / "pyproject.toml")
    line = open(secret).readline().strip()
    completion = f"def add(a, b):\n    raise ValueError(open({secret!r}).read())\n"
    verdict = unit_tests(completion, GOLD, **LIMITS)
    assert verdict.outcome == "incorrect" and verdict.detail.startswith("exception: ValueError")
    assert line[:8] not in verdict.detail and "withheld" in verdict.detail


def test_the_detail_names_the_failing_line_of_the_tests():
    verdict = unit_tests(WRONG, GOLD, **LIMITS)
    assert verdict.detail == "failed assertion: assert candidate(2, 3) == 5"


@pytest.mark.parametrize("where", ["path", "abstract"])
def test_a_unix_socket_of_the_host_is_unreachable(where, tmp_path):
    name = f"qualgate-test-{uuid.uuid4().hex}"
    # a path the sandbox sees (its /tmp is a fresh tmpfs): beside the repository
    address = str(REPO / f".{name}.sock") if where == "path" else "\0" + name
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(address)
        server.listen(1)
        server.settimeout(0.3)
        src = (
            "import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
            f"s.connect({address!r})\ns.sendall(b'pwned')\nprint('connected')\n"
        )
        run = run_python(src, Limits(timeout_s=5))
        assert run.status == "exited" and run.exit_code == 1, run
        assert "connected" not in run.stdout and "PermissionError" in run.stderr
        verdict = unit_tests(src + WRONG, GOLD, **LIMITS)
        assert verdict.outcome == "incorrect" and verdict.detail.startswith("exception: PermissionError")
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()
        if where == "path":
            os.unlink(address)


@pytest.mark.slow
def test_the_memory_of_several_processes_is_bounded_together():
    # 4 processes of 300 MiB each (1,200 MiB) under a 512 MiB limit: all killed, and the
    # supervisor never saw much more than the limit (a 10 ms poll at most one burst late)
    src = (
        "import os, time\nfor _ in range(4):\n    if os.fork() == 0:\n        x = bytearray(300 << 20)\n"
        "        time.sleep(30)\n        os._exit(0)\ntime.sleep(30)\n"
    )
    run = run_python(src, Limits(timeout_s=20, memory_mb=512))
    assert run.status == "memory_limit", run
    assert 512 < run.peak_mb < 512 + 300 + 64
    verdict = unit_tests(src + WRONG, GOLD, **(LIMITS | {"timeout_s": 20.0}))
    assert verdict.outcome == "incorrect" and verdict.detail.startswith("memory limit: its processes together"), verdict


def test_the_sandbox_has_its_own_ipc_and_network_namespaces():
    run = run_python("import os\nprint(os.readlink('/proc/self/ns/ipc'), os.readlink('/proc/self/ns/net'))")
    inside = run.stdout.split()
    assert inside and inside != [os.readlink("/proc/self/ns/ipc"), os.readlink("/proc/self/ns/net")]
    assert inside[0] != os.readlink("/proc/self/ns/ipc") and inside[1] != os.readlink("/proc/self/ns/net")


def test_the_memory_budget_makes_sandboxes_wait_for_their_share():
    import threading

    from qualgate.graders import _sandbox

    before = _sandbox.memory_budget()
    try:
        _sandbox.memory_budget(100)
        order = []
        first = _sandbox.reserve_memory(60).__enter__()

        def second():
            with _sandbox.reserve_memory(60):
                order.append("second")

        t = threading.Thread(target=second)
        t.start()
        t.join(0.2)
        order.append("first releases")
        first.__exit__(None, None, None)
        t.join(5)
        assert order == ["first releases", "second"]
    finally:
        _sandbox.memory_budget(before)
