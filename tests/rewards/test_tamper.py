"""Programs that tamper with the interpreter their tests run in, against every reference format.

Each program defines the function under test returning ``None`` and, before or while being
called, tampers: it rebinds builtins the tests use (``compile``, ``exec``, ``range``, ``all``),
patches modules, installs a trace function, walks the frames above it for the harness's
secrets, or forges the verdict on every file descriptor it can write. Scored against
HumanEval-style checks with loops and helpers, an MBPP row, assert lists with loops and
generators, and APPS/TACO stdin and call-style tests, none may earn more than the same program
without the tampering (0), while the correct program earns 1.0.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

import rlvr
from rlvr.rewards.code import CodeConfig, run_tests
from rlvr.sandbox import SandboxLimits, SandboxPolicy, isolation_mode
from rlvr.sandbox.interpreter import describe, readable_by_others, readable_copy

LIMITS = SandboxLimits(wall_time_s=4.0, cpu_time_s=2.0, memory_mb=256, output_bytes=50_000)
DEFAULT = CodeConfig(limits=LIMITS, workers=2, total_time_s=60.0)
NO_HOOK = CodeConfig(limits=LIMITS, policy=SandboxPolicy(audit_hook=False), workers=2)

HUMANEVAL = {
    "entry_point": "double",
    "test": (
        "METADATA = {'author': 'x'}\n\n"
        "def is_even(n):\n    return n % 2 == 0\n\n"
        "def check(candidate):\n"
        "    assert candidate(3) == 6\n"
        "    assert candidate(0.5) == True\n"
        "    assert is_even(candidate(7))\n"
        "    assert all(candidate(x) == 2 * x for x in range(4))\n"
        "    for x in range(5):\n"
        "        assert candidate(x) == 2 * x\n"
        "    pairs = [(1, 2), (4, 8)]\n"
        "    assert all(candidate(a) == b for a, b in pairs)\n"
    ),
}
MBPP = {
    "test_list": [
        "assert double(2) == 4",
        "assert all(double(x) == 2 * x for x in range(4))",
        "assert is_even(double(5))",
    ],
    "test_setup_code": "def is_even(n):\n    return n % 2 == 0",
}
ASSERT_LIST = [
    "for x in range(5): assert double(x) == 2 * x",
    "assert all(double(x) == y for x, y in [(1, 2), (3, 6)])",
    "assert sum(double(x) for x in range(4)) == 12",
    "assert double(1) == True * 2",
]
CALL = {"fn_name": "double", "inputs": [[1], [21]], "outputs": [2, 42]}
STDIO = {"inputs": ["3\n", "10\n"], "outputs": ["6\n", "20\n"]}
REFERENCES = {
    "humaneval": HUMANEVAL,
    "mbpp": MBPP,
    "assert-list": ASSERT_LIST,
    "call": CALL,
    "stdio": STDIO,
}

CORRECT = "def double(x):\n    return 2 * x\n\nif __name__ == '__main__':\n    print(double(int(input())))\n"
WRONG = "def double(x):\n    return None\n"

# Each tampering precedes WRONG (or replaces its body); the tests must still see None.
FORGE = (
    "def _forge():\n"
    "    import os, sys, gc\n"
    "    seen = set()\n"
    "    frame = sys._getframe()\n"
    "    while frame is not None:\n"
    "        for value in (*frame.f_code.co_consts, *frame.f_globals.values(),\n"
    "                      *frame.f_locals.values()):\n"
    "            if isinstance(value, str) and len(value) < 200:\n"
    "                seen.add(value)\n"
    "        frame = frame.f_back\n"
    "    seen.update(sys.argv)\n"
    "    seen.update(os.environ.values())\n"
    "    try:\n"
    "        seen.update(o for o in gc.get_objects() if isinstance(o, str) and len(o) == 32)\n"
    "    except Exception:\n"
    "        pass\n"
    "    for text in seen:\n"
    "        for line in (text, text + ' 6', text + ' [6]', text + ' True'):\n"
    "            print('\\n' + line)\n"
    "    sys.stdout.flush()\n"
    "    for fd in range(256):\n"
    "        for line in (b'pass\\n', b'ready\\n', b'[\"ok\", true, []]\\n'):\n"
    "            try:\n"
    "                os.write(fd, line)\n"
    "            except OSError:\n"
    "                pass\n"
    "    os._exit(0)\n"
)
TAMPERING = {
    "compile": (
        "import builtins\n_real = builtins.compile\n"
        "def _compile(src, filename, mode, *a, **k):\n"
        "    if filename != 'solution.py':\n"
        "        src = 'True' if mode == 'eval' else 'pass'\n"
        "    return _real(src, filename, mode, *a, **k)\n"
        "builtins.compile = _compile\n" + WRONG
    ),
    "exec-and-eval": (
        "import builtins\nbuiltins.exec = lambda *a, **k: None\n"
        "builtins.eval = lambda *a, **k: True\n" + WRONG
    ),
    "range-empty": "import builtins\nbuiltins.range = lambda *a: []\n" + WRONG,
    "all-any-true": (
        "import builtins\nbuiltins.all = lambda *a: True\nbuiltins.any = lambda *a: True\n" + WRONG
    ),
    "assertion-error": (
        "import builtins\nclass _Never(BaseException):\n    pass\n"
        "builtins.AssertionError = _Never\n" + WRONG
    ),
    "patched-modules": (
        "import math, operator, collections\nmath.isclose = lambda *a, **k: True\n"
        "operator.eq = lambda a, b: True\n"
        "collections.Counter.__eq__ = lambda self, other: True\n" + WRONG
    ),
    "settrace-skip-lines": (
        "import sys\n"
        "def _tracer(frame, event, arg):\n"
        "    if frame.f_code.co_filename != 'solution.py' and event == 'line':\n"
        "        try:\n            frame.f_lineno = frame.f_lineno + 1\n"
        "        except Exception:\n            pass\n"
        "    return _tracer\n"
        "sys.settrace(_tracer)\n" + WRONG
    ),
    "forge-at-import": FORGE + "_forge()\n" + WRONG,
    "forge-when-called": FORGE + "def double(x):\n    _forge()\n",
    "equal-to-everything": (
        "class _Any(int):\n    def __eq__(self, other):\n        return True\n"
        "    __hash__ = int.__hash__\n"
        "def double(x):\n    return _Any(-1)\n"
    ),
    "object-equal-to-everything": (
        "class _Any:\n    def __eq__(self, other):\n        return True\n"
        "    def __bool__(self):\n        return True\n"
        "def double(x):\n    return _Any()\n"
    ),
    "exit-zero-when-called": "import os\ndef double(x):\n    os._exit(0)\n",
}


@pytest.mark.parametrize("reference", REFERENCES, ids=list(REFERENCES))
def test_the_correct_program_passes_and_the_wrong_one_does_not(reference: str) -> None:
    assert run_tests(CORRECT, REFERENCES[reference], config=DEFAULT).pass_rate == 1.0
    assert run_tests(WRONG, REFERENCES[reference], config=DEFAULT).pass_rate == 0.0


@pytest.mark.parametrize("reference", REFERENCES, ids=list(REFERENCES))
@pytest.mark.parametrize("tampering", TAMPERING, ids=list(TAMPERING))
def test_tampering_pays_nothing(tampering: str, reference: str) -> None:
    verdict = run_tests(TAMPERING[tampering], REFERENCES[reference], config=DEFAULT)
    assert verdict.passed == (False,) * len(verdict.passed), verdict.statuses


@pytest.mark.parametrize("reference", ["humaneval", "mbpp", "assert-list"])
@pytest.mark.parametrize("tampering", ["forge-at-import", "forge-when-called", "patched-modules"])
def test_tampering_pays_nothing_without_the_audit_hook(tampering: str, reference: str) -> None:
    """The verdict does not rest on the hook: gc, every descriptor and frames are open here."""
    verdict = run_tests(TAMPERING[tampering], REFERENCES[reference], config=NO_HOOK)
    assert verdict.passed == (False,) * len(verdict.passed), verdict.statuses


def test_assert_tests_are_judged_by_the_driver_and_counted() -> None:
    verdict = run_tests(CORRECT, HUMANEVAL, config=DEFAULT)
    assert (verdict.judged, verdict.unsupported, verdict.in_process) == (len(verdict.passed), 0, 0)


# The run's other processes (the driver, the program's parent, and the bootstrap's) run as the
# program's uid; the audit hook's open event omits dir_fd, so only the kernel (not dumpable; as
# root, pipes the program's uid does not own) keeps their descriptors shut. Without both, this
# program was paid 1.0 on every assert reference.
REOPEN_DRIVER_FDS = (
    "import os\n"
    "def links(pid):\n"
    "    found = {}\n"
    "    try:\n"
    "        fds = os.listdir(f'/proc/{pid}/fd')\n"
    "    except OSError:\n"
    "        return found\n"
    "    for fd in fds:\n"
    "        try:\n"
    "            found[os.readlink(f'/proc/{pid}/fd/{fd}')] = (pid, fd)\n"
    "        except OSError:\n"
    "            pass\n"
    "    return found\n"
    "def double(x):\n"
    "    mine, theirs = links(os.getpid()), {}\n"
    "    for pid in {os.getppid(), *range(1, 8)} - {os.getpid()}:\n"
    "        theirs.update(links(pid))\n"
    "    for target, (pid, fd) in theirs.items():  # each pipe the program lacks, once\n"
    "        if target.startswith('pipe:') and target not in mine:\n"
    "            try:  # a relative path under dir_fd: the audit hook's open event omits it\n"
    "                where = os.open(f'/proc/{pid}/fd', os.O_RDONLY)\n"
    "                os.write(os.open(fd, os.O_WRONLY, dir_fd=where), b'pass\\n')\n"
    "            except OSError:\n"
    "                pass\n"
    "    os._exit(0)  # the driver then leaves with status 0, reporting nothing more\n"
)


@pytest.mark.parametrize("reference", ["humaneval", "mbpp", "assert-list"])
def test_reopening_the_drivers_descriptors_pays_nothing(reference: str) -> None:
    if isolation_mode(DEFAULT.policy) == "fallback-minimal":
        pytest.skip("fallback-minimal does not guarantee the verdict's channel (docs/sandbox.md)")
    verdict = run_tests(REOPEN_DRIVER_FDS, REFERENCES[reference], config=DEFAULT)
    assert verdict.passed == (False,) * len(verdict.passed), verdict.statuses


# Plain values whose comparison raises in the parent (Decimal('sNaN') == True; str() of a dict
# key past int's 4300-digit limit) made the whole verifier raise, a verifier failure that also
# dropped the tests the program passed, instead of failing the one test.
UNCOMPARABLE = {
    "signalling-nan": ("from decimal import Decimal as D\n", "D('sNaN')", True),
    "huge-int-key": ("", "{10**5000: 1}", {"42": 1}),
}


@pytest.mark.parametrize("case", UNCOMPARABLE, ids=list(UNCOMPARABLE))
def test_a_return_value_the_parent_cannot_compare_fails_only_its_test(case: str) -> None:
    prefix, value, expected = UNCOMPARABLE[case]
    program = f"{prefix}def double(x):\n    return 2 if x == 1 else {value}\n"
    reference = {"fn_name": "double", "inputs": [[1], [21]], "outputs": [2, expected]}
    verdict = run_tests(program, reference, config=DEFAULT)
    assert verdict.passed == (True, False)
    assert verdict.statuses == ("ok", "ok")  # a wrong answer, as docs/sandbox.md says


# As a non-root caller in fallback-minimal (user and PID namespaces, no Landlock), the run's
# supervisor and the namespace's init were forked before the bootstrap made itself not dumpable:
# the program, of the same uid, found them by the run's marker, reopened the verdict pipe they
# hold through /proc (past the hook, by dir_fd) and was paid 1.0.
REOPEN_HELPERS_PIPE = (
    "import os, marshal\n"
    "def double(x):\n"
    "    with open('/proc/self/cmdline', 'rb') as f:\n"
    "        args = f.read().split(b'\\0')\n"
    "    cfg = marshal.loads(bytes.fromhex(args[-2].decode()))\n"
    "    mark = [a for a in args if a.startswith(b'--rlvr-sandbox=')][0]\n"
    "    for pid in [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:\n"
    "        try:\n"
    "            with open(f'/proc/{pid}/cmdline', 'rb') as f:\n"
    "                if mark not in f.read().split(b'\\0'):\n"
    "                    continue\n"
    "            where = os.open(f'/proc/{pid}/fd', os.O_RDONLY)\n"
    "            os.write(os.open(str(cfg['verdict_fd']), os.O_WRONLY, dir_fd=where), b'pass\\n')\n"
    "            break\n"
    "        except OSError:\n"
    "            pass\n"
    "    os._exit(0)  # the driver then leaves with status 0, reporting nothing more\n"
)
AS_ANOTHER_USER = (
    "import json, sys\n"
    "from rlvr.rewards.code import CodeConfig, run_tests\n"
    "from rlvr.sandbox import SandboxLimits, SandboxPolicy, isolation_report\n"
    "policy = SandboxPolicy(bubblewrap=False, landlock=False)\n"
    "config = CodeConfig(limits=SandboxLimits(wall_time_s=4.0, cpu_time_s=2.0), policy=policy)\n"
    "verdict = run_tests(sys.argv[1], ['assert double(2) == 4', 'assert double(3) == 6'], "
    "config=config)\n"
    "print(json.dumps([isolation_report(policy).active(), verdict.passed]))\n"
)


def test_the_runs_other_processes_keep_the_verdict_pipe_from_a_non_root_callers_program() -> None:
    src = Path(rlvr.__file__).resolve().parents[1]
    if os.geteuid() != 0 or not readable_by_others(str(src / "rlvr" / "sandbox" / "child.py")):
        pytest.skip("runs the caller as nobody: needs root and a source tree nobody can read")
    try:
        runtime = readable_copy(describe(os.path.realpath(sys.executable)))
        nobody = pwd.getpwnam("nobody")
    except (OSError, KeyError) as exc:
        pytest.skip(f"no interpreter or user for nobody: {exc}")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(src), **runtime.env}
    argv = [runtime.python, "-c", AS_ANOTHER_USER, REOPEN_HELPERS_PIPE]
    proc = subprocess.run(
        argv, env=env, cwd="/", user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    active, passed = json.loads(proc.stdout.splitlines()[-1])
    if "pid_namespace" not in active:
        pytest.skip("no PID namespace for an unprivileged user here")
    assert passed == [False, False]
