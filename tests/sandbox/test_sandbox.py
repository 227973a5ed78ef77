"""Sandbox containment: each hostile program is stopped, reported, and leaves nothing behind.

Limits are kept small so the file runs in a few seconds. Tests of a kernel layer on its own
(audit hook switched off) are skipped where the probe says that layer is missing here. Most
containment tests run under every isolation mode this machine can give: bubblewrap (where
installed), the fallback without it, and a minimal policy (no namespaces, no uid drop).
"""

from __future__ import annotations

import doctest
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rlvr import sandbox
from rlvr.sandbox import (
    SandboxLimits,
    SandboxPolicy,
    SandboxStatus,
    isolation_report,
    process,
    run_untrusted,
)
from rlvr.sandbox.process import CALLER_MARK, marked_pids

FAST = SandboxLimits(wall_time_s=5.0, cpu_time_s=1.0, memory_mb=256, output_bytes=10_000)
DEFAULT = SandboxPolicy()
NO_HOOK = SandboxPolicy(audit_hook=False)
# What a machine without bubblewrap gets.
FALLBACK = SandboxPolicy(bubblewrap=False)
FALLBACK_NO_HOOK = SandboxPolicy(bubblewrap=False, audit_hook=False)
# What a machine without namespaces, without root and without Landlock gets: rlimits,
# process group, hook.
MINIMAL = SandboxPolicy(namespaces=False, drop_privileges=False, landlock=False)
MINIMAL_NO_HOOK = SandboxPolicy(
    namespaces=False, drop_privileges=False, landlock=False, audit_hook=False
)
BOTH = pytest.mark.parametrize(
    "policy", [DEFAULT, FALLBACK, MINIMAL], ids=["all-layers", "fallback", "minimal"]
)


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Iterator[None]:
    # This process's runs only: a training run or another suite may use the sandbox meanwhile.
    assert marked_pids(CALLER_MARK) == [], "a sandboxed process was alive before the test"
    yield
    assert marked_pids(CALLER_MARK) == [], "a sandboxed process outlived its run"


def _requires(policy: SandboxPolicy, layer: str) -> None:
    if not getattr(isolation_report(policy), layer):
        pytest.skip(f"{layer} is not available on this machine")


def test_runs_program_with_stdin() -> None:
    result = run_untrusted("print(sum(map(int, input().split())))", stdin="2 3\n", limits=FAST)
    assert result.status is SandboxStatus.OK
    assert (result.exit_code, result.signal, result.stdout, result.stderr) == (0, None, "5\n", "")
    assert not result.output_truncated


def test_exit_status_and_exception_are_errors() -> None:
    exited = run_untrusted("import sys\nprint('x')\nsys.exit(3)", limits=FAST)
    assert (exited.status, exited.exit_code, exited.stdout) == (SandboxStatus.ERROR, 3, "x\n")
    raised = run_untrusted("def g():\n    1 / 0\ng()", limits=FAST)
    assert (raised.status, raised.exit_code) == (SandboxStatus.ERROR, 1)
    assert raised.stderr.splitlines()[-1] == "ZeroDivisionError: division by zero"
    assert "<string>" not in raised.stderr  # the bootstrap's frames are not shown


def test_exit_and_quit_work_as_without_isolation() -> None:
    """``python -S`` leaves out ``site``'s ``exit`` and ``quit``; programs use them to stop."""
    for name in ("exit", "quit"):
        done = run_untrusted(f"print(1)\n{name}()\nprint(2)", limits=FAST)
        assert (done.status, done.stdout) == (SandboxStatus.OK, "1\n"), done.stderr
        failed = run_untrusted(f"{name}(4)", limits=FAST)
        assert (failed.status, failed.exit_code) == (SandboxStatus.ERROR, 4)


@BOTH
def test_a_program_may_raise_its_stack_limit_and_no_other(policy: SandboxPolicy) -> None:
    """``resource.setrlimit(RLIMIT_STACK, ...)`` is how programs prepare for deep recursion."""
    raise_ = "import resource\nresource.setrlimit(resource.RLIMIT_{}, (-1, -1))\nprint('raised')"
    stack = run_untrusted(raise_.format("STACK"), limits=FAST, policy=policy)
    assert (stack.status, stack.stdout) == (SandboxStatus.OK, "raised\n"), stack.stderr
    for name in ("CPU", "AS", "NOFILE", "FSIZE"):
        other = run_untrusted(raise_.format(name), limits=FAST, policy=policy)
        assert other.status is SandboxStatus.ERROR and "not permitted" in other.stderr


def test_syntax_error_has_its_own_status() -> None:
    result = run_untrusted("def f(:\n    pass", limits=FAST)
    assert result.status is SandboxStatus.SYNTAX_ERROR
    assert "SyntaxError" in result.stderr


@BOTH
def test_infinite_loop_hits_the_cpu_limit(policy: SandboxPolicy) -> None:
    result = run_untrusted("while True:\n    pass", limits=FAST, policy=policy)
    assert result.status is SandboxStatus.TIMEOUT
    assert result.signal == signal.SIGXCPU  # the CPU limit, not the wall clock, ended it
    assert result.cpu_time_s >= 0.9


def test_sleeping_program_hits_the_wall_clock() -> None:
    limits = SandboxLimits(wall_time_s=0.5, cpu_time_s=5.0)
    result = run_untrusted("import time\ntime.sleep(60)", limits=limits)
    assert (result.status, result.signal) == (SandboxStatus.TIMEOUT, signal.SIGKILL)


@pytest.mark.slow
def test_waiting_for_a_cpu_held_by_busy_neighbours_is_not_the_programs_time() -> None:
    """A concurrent run's busy threads (a hostile sibling in a GRPO group) starve a correct
    program of CPU; that wait does not count against its wall-clock limit (up to the limit
    again), so the neighbour cannot time it out. A sleeper still times out (test above)."""
    run_untrusted("pass", limits=FAST)  # the probe and the interpreter copy, before the hogs
    hogs = [
        subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
        for _ in range(40 * len(os.sched_getaffinity(0)))  # each its own session and autogroup
    ]
    stop = threading.Timer(3.0, lambda: [hog.kill() for hog in hogs])
    stop.start()
    try:
        spin = (
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3:\n    pass"
        )
        limits = SandboxLimits(wall_time_s=2.0, cpu_time_s=5.0)
        result = run_untrusted(spin + "\nprint('done')", limits=limits)
    finally:
        stop.cancel()
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert (result.status, result.stdout) == (SandboxStatus.OK, "done\n")
    assert result.wall_time_s > limits.wall_time_s  # it was starved past the limit


@BOTH
def test_fork_bomb_is_refused(policy: SandboxPolicy) -> None:
    bomb = "import os\nwhile True:\n    os.fork()"
    result = run_untrusted(bomb, limits=FAST, policy=policy)
    assert result.status is SandboxStatus.ERROR
    assert "'os.fork' is not permitted" in result.stderr


def test_fork_bomb_is_contained_by_the_kernel_without_the_hook() -> None:
    _requires(NO_HOOK, "process_limit")
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    limits = SandboxLimits(wall_time_s=1.0, cpu_time_s=5.0, processes=16)
    result = run_untrusted(bomb, limits=limits)
    assert result.status is SandboxStatus.TIMEOUT


@pytest.mark.parametrize(
    "policy",
    [NO_HOOK, FALLBACK_NO_HOOK, MINIMAL_NO_HOOK],
    ids=["all-layers", "fallback", "minimal"],
)
def test_escaped_background_process_is_killed(policy: SandboxPolicy) -> None:
    # Without the hook a child may fork, leave the process group with setsid and outlive the
    # program; the marker scan (and the PID namespace, where there is one) still finds it.
    escape = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    time.sleep(60)\n"
        "else:\n"
        "    print('parent done', flush=True)\n"
    )
    result = run_untrusted(escape, limits=FAST, policy=policy)
    assert result.status is SandboxStatus.OK
    assert result.stdout == "parent done\n"
    # the autouse fixture checks that the sleeper is gone


def _wait_for(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@BOTH
def test_run_dies_with_its_caller(policy: SandboxPolicy, tmp_path: Path) -> None:
    _requires(policy, "parent_death_signal")
    caller = (
        "from rlvr.sandbox import *\n"
        "from rlvr.sandbox.process import CALLER_MARK\n"
        f"isolation_report({policy!r})\n"  # the probe's own runs are over once this returns
        "print(CALLER_MARK, flush=True)\n"
        f"run_untrusted('import time\\ntime.sleep(60)', policy={policy!r})\n"
    )
    src = str(Path(sandbox.__file__).parents[2])
    # A killed caller cannot delete its working directory: keep it under pytest's tmp_path.
    env = {**os.environ, "PYTHONPATH": src, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", caller], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        mark = proc.stdout.readline().strip()
        assert len(mark) == 8 and mark != CALLER_MARK  # its runs are told from this process's
        assert _wait_for(lambda: len(marked_pids(mark)) > 0, 30.0), "the run never started"
        assert marked_pids(CALLER_MARK) == []
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    assert _wait_for(lambda: marked_pids(mark) == [], 5.0), "the run outlived its caller"


@BOTH
def test_ten_gigabyte_allocation_is_a_memory_error(policy: SandboxPolicy) -> None:
    program = "x = bytearray(10 * 1024**3)\nprint('allocated')"
    result = run_untrusted(program, limits=FAST, policy=policy)
    assert result.status is SandboxStatus.MEMORY
    assert "allocated" not in result.stdout


def test_growing_allocation_is_a_memory_error() -> None:
    grow = "chunks = []\nwhile True:\n    chunks.append(bytearray(1 << 20))"
    assert run_untrusted(grow, limits=FAST).status is SandboxStatus.MEMORY


@pytest.mark.parametrize(
    "policy",
    [DEFAULT, FALLBACK, MINIMAL, NO_HOOK, FALLBACK_NO_HOOK],
    ids=["all-layers", "fallback", "minimal", "kernel-only", "fallback-kernel-only"],
)
def test_write_outside_the_working_directory_is_refused(tmp_path, policy: SandboxPolicy) -> None:
    if not policy.audit_hook:
        _requires(policy, "uid_drop")
    target = tmp_path / "escaped.txt"
    result = run_untrusted(f"open({str(target)!r}, 'w').write('x')", limits=FAST, policy=policy)
    assert result.status is SandboxStatus.ERROR
    # Under bubblewrap without the hook the directory is not there at all.
    hidden = not policy.audit_hook and isolation_report(policy).bubblewrap
    assert ("FileNotFoundError" if hidden else "PermissionError") in result.stderr
    assert not target.exists()


def test_working_directory_is_writable_fresh_and_removed() -> None:
    program = (
        "import os\n"
        "print(sorted(os.listdir('.')))\n"
        "os.makedirs('sub/dir')\n"
        "with open('sub/dir/f.txt', 'w') as f:\n"
        "    f.write('hello')\n"
        "print(open('sub/dir/f.txt').read())\n"
        "print(os.getcwd())\n"
    )
    result = run_untrusted(program, limits=FAST)
    assert result.status is SandboxStatus.OK
    listing, content, cwd = result.stdout.splitlines()
    assert (listing, content) == ("[]", "hello")
    assert not os.path.exists(cwd)


@pytest.mark.parametrize(
    "policy",
    [DEFAULT, FALLBACK, MINIMAL, NO_HOOK, FALLBACK_NO_HOOK],
    ids=["all-layers", "fallback", "minimal", "kernel-only", "fallback-kernel-only"],
)
def test_socket_connection_is_refused(policy: SandboxPolicy) -> None:
    if not policy.audit_hook:
        _requires(policy, "network_namespace")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        program = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\nprint('connected')"
        result = run_untrusted(program, limits=FAST, policy=policy)
        server.settimeout(0.05)
        with pytest.raises(TimeoutError):
            server.accept()
    assert result.status is SandboxStatus.ERROR
    assert "connected" not in result.stdout


@BOTH
def test_output_flood_is_cut_at_the_cap(policy: SandboxPolicy) -> None:
    result = run_untrusted("while True:\n    print('x' * 1000)", limits=FAST, policy=policy)
    assert result.status is SandboxStatus.OUTPUT_LIMIT
    assert result.output_truncated
    assert len(result.stdout) == FAST.output_bytes
    assert result.signal == signal.SIGKILL


def test_stderr_flood_counts_towards_the_cap() -> None:
    result = run_untrusted("import sys\nwhile True:\n    sys.stderr.write('e' * 1000)", limits=FAST)
    assert result.status is SandboxStatus.OUTPUT_LIMIT
    assert len(result.stderr) == FAST.output_bytes


@BOTH
def test_stdio_can_be_reopened_by_path(policy: SandboxPolicy) -> None:
    program = "data = open('/dev/stdin').read()\nopen('/dev/stdout', 'w').write(data.upper())"
    result = run_untrusted(program, stdin="abc\n", limits=FAST, policy=policy)
    assert (result.status, result.stdout) == (SandboxStatus.OK, "ABC\n")


def test_environment_holds_no_inherited_variables(monkeypatch) -> None:
    monkeypatch.setenv("RLVR_TEST_SECRET", "s3cret")
    result = run_untrusted("import os\nprint(sorted(os.environ))", limits=FAST)
    assert result.status is SandboxStatus.OK
    assert "RLVR_TEST_SECRET" not in result.stdout
    assert eval(result.stdout) == ["HOME", "LANG", "LC_ALL", "PATH", "TMPDIR"]


def test_file_size_and_open_file_limits() -> None:
    limits = SandboxLimits(wall_time_s=5.0, file_bytes=1 << 20, open_files=16)
    big = run_untrusted("open('big', 'wb').write(b'x' * (2 << 20))", limits=limits)
    assert big.status is SandboxStatus.ERROR
    assert "File too large" in big.stderr
    many = run_untrusted("fs = [open('f%d' % i, 'w') for i in range(64)]", limits=limits)
    assert many.status is SandboxStatus.ERROR
    assert "Too many open files" in many.stderr


def test_files_in_the_working_directory_are_capped_in_total_under_bubblewrap() -> None:
    # Each file is capped by RLIMIT_FSIZE but not their number: without a cap on the total, a
    # program wrote 1.3 GB into the host's /tmp in 2.5 s, per run.
    _requires(DEFAULT, "bubblewrap")
    program = (
        "import errno\n"
        "try:\n"
        "    for i in range(12):\n"
        "        with open('f%d' % i, 'wb') as f:\n"
        "            f.write(b'x' * (1 << 20))\n"
        "except OSError as exc:\n"
        "    print(i, errno.errorcode[exc.errno])\n"
    )
    limits = SandboxLimits(wall_time_s=5.0, file_bytes=1 << 20, disk_bytes=4 << 20)
    result = run_untrusted(program, limits=limits)
    assert result.status is SandboxStatus.OK, result.stderr
    assert result.stdout.split() == ["4", "ENOSPC"]  # files 0-3 fill the 4 MiB
    default = run_untrusted(program.replace("12", "80"), limits=SandboxLimits(wall_time_s=5.0))
    assert default.stdout.split()[1] == "ENOSPC"  # 64 MiB by default


def test_subprocess_and_ctypes_are_refused() -> None:
    for program in (
        "import subprocess\nsubprocess.run(['true'])",
        "import ctypes",
        "import os\nos.system('true')",
    ):
        result = run_untrusted(program, limits=FAST)
        assert result.status is SandboxStatus.ERROR, program
        assert "not permitted" in result.stderr, program


def test_concurrent_runs_do_not_mix() -> None:
    results: dict[int, str] = {}

    def one(i: int) -> None:
        results[i] = run_untrusted("print(int(input()) ** 2)", stdin=str(i), limits=FAST).stdout

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: f"{i * i}\n" for i in range(6)}


def test_works_without_pidfd(monkeypatch) -> None:
    monkeypatch.setattr(process, "_pidfd", lambda pid: None)  # kernels before 5.3: polling
    assert run_untrusted("print(7)", limits=FAST).stdout == "7\n"
    slow = run_untrusted("import time\ntime.sleep(60)", limits=SandboxLimits(wall_time_s=0.3))
    assert slow.status is SandboxStatus.TIMEOUT


def test_wall_time_is_the_runs_own() -> None:
    before = time.monotonic()
    result = run_untrusted("import time\ntime.sleep(0.2)", limits=FAST)
    assert 0.2 <= result.wall_time_s <= time.monotonic() - before


@BOTH
def test_a_program_may_leave_with_any_code_without_faking_a_sandbox_error(policy) -> None:
    """The bootstrap says when the program starts: ``EXIT_SETUP`` after that is the program's."""
    for code in (251, 252, 253, 3):
        result = run_untrusted(f"import os\nos._exit({code})", limits=FAST, policy=policy)
        assert result.exit_code == code and result.status is not SandboxStatus.SANDBOX_ERROR


def test_missing_interpreter_is_a_sandbox_error() -> None:
    result = run_untrusted(
        "print(1)", limits=FAST, policy=SandboxPolicy(python="/nonexistent/python")
    )
    assert result.status is SandboxStatus.SANDBOX_ERROR


@pytest.mark.parametrize("python", ["/bin/true", "/bin/echo"])
def test_an_interpreter_that_is_not_python_is_a_sandbox_error(python: str) -> None:
    result = run_untrusted("print(1)", limits=FAST, policy=SandboxPolicy(python=python))
    assert result.status is SandboxStatus.SANDBOX_ERROR
    assert "no interpreter to run the program" in result.stderr


def test_a_child_that_cannot_be_started_is_a_sandbox_error(monkeypatch) -> None:
    isolation_report(DEFAULT)  # probed before process creation fails

    def refuse(*args, **kwargs):
        raise OSError("no process for you")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    result = run_untrusted("print(1)", limits=FAST)
    assert result.status is SandboxStatus.SANDBOX_ERROR
    assert "could not start the sandboxed program" in result.stderr
    assert "no process for you" in result.stderr


def test_isolation_report_is_consistent() -> None:
    report = isolation_report(DEFAULT)
    assert report.audit_hook and report.isolated_interpreter
    assert set(report.active()) <= {f for f in report.__dataclass_fields__ if f != "notes"}
    assert report.mode in sandbox.ISOLATION_MODES
    assert sandbox.isolation_mode(DEFAULT) == report.mode
    if os.geteuid() != 0:
        assert not report.uid_drop and not report.process_limit
    if not report.uid_drop:
        assert not report.process_limit
    if report.bubblewrap:
        assert report.mode == "bwrap" and report.network_namespace and report.pid_namespace
    assert not isolation_report(NO_HOOK).audit_hook
    fallback = isolation_report(FALLBACK)
    assert not fallback.bubblewrap and fallback.mode.startswith("fallback-")
    assert fallback.mode == (
        "fallback-landlock"
        if fallback.landlock
        else "fallback-uid"
        if fallback.uid_drop
        else "fallback-minimal"
    )
    assert isolation_report(MINIMAL).mode == "fallback-minimal"


def test_isolation_is_logged_once(caplog) -> None:
    policy = SandboxPolicy(user="nobody", python=sys.executable)  # a policy not probed yet
    with caplog.at_level("INFO", logger="rlvr.sandbox"):
        mode = sandbox.isolation_mode(policy)
        sandbox.isolation_mode(policy)
        run_untrusted("print(1)", limits=FAST, policy=policy)
    lines = [r.getMessage() for r in caplog.records if "sandbox isolation:" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(f"sandbox isolation: {mode} (")


def test_program_keeps_no_capability() -> None:
    # Without Landlock the program may read its own /proc/self/status.
    for policy in (SandboxPolicy(landlock=False), SandboxPolicy(bubblewrap=False, landlock=False)):
        result = run_untrusted(
            "print([l for l in open('/proc/self/status') if l.startswith('Cap')])",
            limits=FAST,
            policy=policy,
        )
        assert result.status is SandboxStatus.OK, result.stderr
        caps = dict(line.split(":") for line in eval(result.stdout))
        if isolation_report(policy).uid_drop:
            assert int(caps["CapEff"], 16) == 0 and int(caps["CapPrm"], 16) == 0, caps


def test_invalid_limits_are_rejected() -> None:
    with pytest.raises(ValueError, match="wall_time_s"):
        SandboxLimits(wall_time_s=0)
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxLimits(memory_mb=-1)


def test_docstring_examples() -> None:
    assert doctest.testmod(sandbox).failed == 0


def test_isolation_level_and_which_verifiers_run_programs():
    from rlvr.rewards.registry import sandbox_isolation
    from rlvr.sandbox import ISOLATION_MODES, isolation_level, isolation_mode

    assert [isolation_level(m) for m in ISOLATION_MODES] == [4, 3, 2, 1]
    assert isolation_level("unavailable") == 0
    assert sandbox_isolation("math") is None and sandbox_isolation("math+format") is None
    assert sandbox_isolation("code:binary") == isolation_mode()


def test_root_without_a_uid_drop_gets_no_capability_and_no_installed_package() -> None:
    # bubblewrap started as root for a root program: --cap-drop ALL, site-packages hidden.
    policy = SandboxPolicy(drop_privileges=False)
    if os.geteuid() != 0 or not isolation_report(policy).bubblewrap:
        pytest.skip("needs root and bubblewrap")
    program = (
        "import os, sysconfig\n"
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')])\n"
        "print(os.listdir(sysconfig.get_paths()['purelib']))\n"
    )
    result = run_untrusted(program, limits=FAST, policy=policy)
    assert result.status is SandboxStatus.OK, result.stderr
    assert result.stdout.splitlines() == ["['0000000000000000']", "[]"]


def test_a_missing_account_means_no_uid_drop_and_says_why() -> None:
    if os.geteuid() != 0:
        pytest.skip("a uid drop needs root")
    report = isolation_report(SandboxPolicy(user="rlvr-no-such-user"))
    assert not report.uid_drop and not report.process_limit
    assert "uid_drop: no user 'rlvr-no-such-user'" in report.notes
