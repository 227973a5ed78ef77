"""Bootstrap that runs inside every sandboxed child process (stdlib only, never imported).

:mod:`rlvr.sandbox.launch` starts ``python -I -S -X utf8 -c <plain.py + channel.py + this file>
--rlvr-sandbox=<marker> <message>``, the message a hex ``marshal`` dump of a ``ChildConfig``
(``json`` would import ``re`` in every run); the program arrives on a descriptor. Its first
byte on ``report_fd`` says the bootstrap started (a run without it is a sandbox error), then
:func:`_setup` applies the layers of ``docs/sandbox.md`` in order, before any untrusted code;
a second byte says the program starts, and its process closes the descriptor before it does
(so a program leaving with ``EXIT_SETUP`` is not taken for a sandbox that failed).

The audit hook is a tripwire, not a boundary: code that corrupts the interpreter's memory or
patches the modules the hook relies on gets past it. The kernel layers are the boundary. In
probe mode every layer is attempted, failures are recorded, and the ``repr`` of a dict saying
what worked is printed instead of running a program.
"""

import _signal as signal  # the C module: ``signal`` would import ``enum``
import marshal
import os
import resource
import sys
from types import SimpleNamespace

EXIT_MEMORY = 251  # the parent (rlvr.sandbox) imports these three
EXIT_SETUP = 252
EXIT_SYNTAX = 253

if "_split" not in globals():  # imported as a module (documentation tools), not in a run
    from rlvr.sandbox.channel import _drive, _exit_like, _read_all, _serve, _split

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
_SYSCALLS = {  # the same numbers on every architecture
    "landlock_abi": 444,
    "landlock_create_ruleset": 444,
    "landlock_add_rule": 445,
    "landlock_restrict_self": 446,
}
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_LANDLOCK_READ = (1 << 2) | (1 << 3)  # READ_FILE, READ_DIR
_LANDLOCK_FILE_RIGHTS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)

_EVENT_NAMES = (
    "os.fork os.forkpty os.system os.posix_spawn os.posix_spawnp os.kill os.killpg"
    " subprocess.Popen pty.spawn resource.setrlimit resource.prlimit gc.get_objects"
    " gc.get_referrers gc.get_referents cpython.PyInterpreterState_New"
)
_BLOCKED_EVENTS = frozenset(_EVENT_NAMES.split())
_BLOCKED_PREFIXES = ("os.exec", "os.spawn", "ctypes.", "socket.")
_MODULE_NAMES = (
    "_posixsubprocess _ctypes ctypes _socket _xxsubinterpreters _xxinterpchannels"
    " _multiprocessing _posixshmem"
)
_BLOCKED_IMPORTS = frozenset(_MODULE_NAMES.split())
# event -> ((path index, dir_fd index or None), ...): filesystem changes checked by the hook.
_PATH_EVENTS = {
    "os.mkdir": ((0, 2),),
    "os.rmdir": ((0, 1),),
    "os.remove": ((0, 1),),
    "os.rename": ((0, 2), (1, 3)),
    "os.symlink": ((1, 2),),
    "os.link": ((0, 2), (1, 3)),
    "os.chmod": ((0, 2),),
    "os.chown": ((0, 3),),
    "os.utime": ((0, 3),),
    "os.truncate": ((0, None),),
    "os.setxattr": ((0, None),),
    "os.removexattr": ((0, None),),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_STD_DEVICES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})


class _Libc:
    """The few libc calls Python 3.11 lacks (unshare, prctl, Landlock), through ctypes, imported
    on first use so that a failure is reported by the step that needed it."""

    def __init__(self):
        self.ct = self.lib = None

    def call(self, name, *args):
        """libc's ``name(*args)``, or ``syscall`` for Landlock's; ints or ctypes pointers."""
        if self.lib is None:
            import ctypes

            self.ct, self.lib = ctypes, ctypes.CDLL(None, use_errno=True)
        values = [self.ct.c_long(a) if isinstance(a, int) else a for a in args]
        if name in _SYSCALLS:
            result = self.lib.syscall(self.ct.c_long(_SYSCALLS[name]), *values)
        else:
            result = getattr(self.lib, name)(*values)
        if result < 0:
            err = self.ct.get_errno()
            raise OSError(err, f"{name}: {os.strerror(err)}")
        return result

    def landlock(self, read_paths, write_paths):
        """Allow reading ``read_paths`` and everything on ``write_paths``, nothing else."""
        abi = self.call("landlock_abi", None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
        ct = self.ct
        handled = (1 << 13) - 1 | (1 << 13 if abi >= 2 else 0) | (1 << 14 if abi >= 3 else 0)
        handled |= 1 << 15 if abi >= 5 else 0
        net, scoped = (3 if abi >= 4 else 0), (3 if abi >= 6 else 0)
        attr = (ct.c_uint64 * 3)(handled, net, scoped)
        size = 8 if abi < 4 else 16 if abi < 6 else 24
        ruleset = self.call("landlock_create_ruleset", ct.byref(attr), size, 0)
        try:
            for paths, rights in ((read_paths, _LANDLOCK_READ), (write_paths, handled)):
                for path in paths:
                    self._landlock_rule(ruleset, path, rights & handled)
            self.call("landlock_restrict_self", ruleset, 0)
        finally:
            os.close(ruleset)
        return abi

    def _landlock_rule(self, ruleset, path, rights):
        class PathBeneath(self.ct.Structure):
            _pack_ = 1
            _fields_ = (("allowed_access", self.ct.c_uint64), ("parent_fd", self.ct.c_int32))

        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            if not os.path.isdir(path):
                rights &= _LANDLOCK_FILE_RIGHTS
            rule = PathBeneath(rights, fd)
            self.call(
                "landlock_add_rule", ruleset, _LANDLOCK_RULE_PATH_BENEATH, self.ct.byref(rule), 0
            )
        finally:
            os.close(fd)


class _Steps:
    """Runs setup steps; strict mode exits on the first failure, probe mode records it."""

    def __init__(self, probe):
        self.probe = probe
        self.report = {}

    def run(self, name, fn, *args):
        try:
            fn(*args)
        except Exception as exc:  # every failure is reported, by name
            if not self.probe:
                os.write(2, f"sandbox setup failed at {name}: {exc!r}\n".encode())
                os._exit(EXIT_SETUP)
            self.report[name] = f"{type(exc).__name__}: {exc}"
            return False
        self.report[name] = True
        return True


def _enter_user_namespace(libc):
    """Own user namespace mapping our uid/gid to themselves (needs to be set before it is used)."""
    uid, gid = os.getuid(), os.getgid()
    libc.call("unshare", _CLONE_NEWUSER)
    maps = {"setgroups": "deny", "uid_map": f"{uid} {uid} 1", "gid_map": f"{gid} {gid} 1"}
    for name, text in maps.items():
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _supervise_program(report_fd):
    """Fork; the parent reports the program's wait status and CPU time, then leaves like it."""
    program = os.fork()
    if program == 0:
        return  # the program's process closes report_fd once it has said it starts
    _, status, usage = os.wait4(program, 0)
    cpu_us = round((usage.ru_utime + usage.ru_stime) * 1e6)
    os.write(report_fd, status.to_bytes(4, "little") + cpu_us.to_bytes(8, "little"))
    _exit_like(status)


def _run_init(program, status_fd, libc):
    """PID 1 of the namespace: reap every orphan until the program ends, report its status.
    When init exits the kernel kills whatever is left in the namespace."""
    try:  # noqa: SIM105 - contextlib would be one more import in every run
        libc.call("prctl", _PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass  # the supervisor's death still reaches init through the process group kill
    while True:
        child, status = os.waitpid(-1, 0)
        if child == program:
            break
    os.write(status_fd, status.to_bytes(4, "little"))
    os._exit(0)


def _enter_pid_namespace(libc):
    """Supervisor (outside) -> init (PID 1) -> program (PID 2, the process that returns); as
    PID 2, the program keeps the usual signal defaults (PID 1 ignores unhandled signals)."""
    libc.call("unshare", _CLONE_NEWPID)
    status_r, status_w = os.pipe()
    init = os.fork()
    if init:  # the supervisor: wait for init, then leave with the program's status
        os.close(status_w)
        _, status = os.waitpid(init, 0)
        reported = os.read(status_r, 4)
        _exit_like(int.from_bytes(reported, "little") if len(reported) == 4 else status)
    os.close(status_r)
    program = os.fork()
    if program:
        _run_init(program, status_w, libc)
    os.close(status_w)


def _set_rlimits(rlimits):
    for name, (soft, hard) in rlimits.items():
        resource.setrlimit(getattr(resource, name), (soft, hard))


def _die_with_parent(libc, parent):
    """SIGKILL this process when its parent dies (needed again after a uid change)."""
    libc.call("prctl", _PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent was already gone
        os._exit(EXIT_SETUP)


def _drop_privileges(uid, gid):
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def _check_usable():
    """Probe: the program can import unloaded stdlib modules, use its working dir and stdin."""
    import statistics  # noqa: F401 - pure-Python module pulling in C extensions

    with open("probe.txt", "w") as f:
        f.write("ok")
    os.remove("probe.txt")
    with open("/dev/stdin", "rb"), open("/dev/null", "wb"):
        pass


def _check_landlock_denies():
    """Probe: Landlock is in force (listing the root directory is refused)."""
    try:
        os.listdir("/")
    except PermissionError:
        return
    raise RuntimeError("listing / was allowed")


def _path_text(path):
    """The path a call used, as an exact ``str``: custom path objects (and ``str`` subclasses'
    methods) could answer differently to the call and to the hook, so only ``str``, ``bytes``
    and the stdlib's pathlib classes pass."""
    if isinstance(path, str):
        return "".join((path,))
    if isinstance(path, bytes):
        return os.fsdecode(b"".join((path,)))
    pathlib = sys.modules.get("pathlib")
    if pathlib is not None and type(path) in (pathlib.PosixPath, pathlib.PurePosixPath):
        return str(path)
    raise PermissionError("sandbox: file changes need a str, bytes or pathlib path")


def _blocked(event, args):
    """Whether the hook refuses ``event``; a program may set its stack limit (deep recursion's
    idiom; ``RLIMIT_AS`` still bounds the stack), no other."""
    if event == "resource.setrlimit" and args[0] == resource.RLIMIT_STACK:
        return False
    return event in _BLOCKED_EVENTS or event.startswith(_BLOCKED_PREFIXES)


def _make_hook(workdir):
    realpath = os.path.realpath
    prefix = workdir.rstrip("/") + "/"

    def check(path, dir_fd=None):
        if isinstance(path, int):
            return
        text = _path_text(path)
        if text in _STD_DEVICES:
            return
        if dir_fd not in (None, -1) and not text.startswith("/"):
            text = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), text)
        full = realpath(text)
        if full != workdir and not full.startswith(prefix):
            raise PermissionError(f"sandbox: writing outside the working directory: {full}")

    def hook(event, args):
        if _blocked(event, args):
            raise PermissionError(f"sandbox: '{event}' is not permitted")
        if event == "import" and args[0] in _BLOCKED_IMPORTS:
            raise ImportError(f"sandbox: importing '{args[0]}' is not permitted")
        if event == "open" and args[2] & _WRITE_FLAGS:
            check(args[0])
        elif event in _PATH_EVENTS:
            for path_i, fd_i in _PATH_EVENTS[event]:
                check(args[path_i], None if fd_i is None else args[fd_i])

    return hook


def _setup(cfg, steps):
    """Apply every configured layer in order; returns in the process that runs the program,
    or, with a test driver, in both of its processes (see :func:`_split`)."""
    libc = _Libc()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if cfg.parent_death_signal:
        steps.run("parent_death_signal", _die_with_parent, libc, cfg.parent)
    if cfg.user_namespace:
        steps.run("user_namespace", _enter_user_namespace, libc)
    if cfg.network_namespace:
        steps.run("network_namespace", libc.call, "unshare", _CLONE_NEWNET)
    # Not dumpable before the fork (the supervisor and init it leaves hold the verdict pipe),
    # and again after a uid change, which resets it to fs.suid_dumpable.
    steps.run("not_dumpable", libc.call, "prctl", _PR_SET_DUMPABLE, 0, 0, 0, 0)
    in_pidns = cfg.pid_namespace and steps.run("pid_namespace", _enter_pid_namespace, libc)
    steps.run("rlimits", _set_rlimits, cfg.rlimits)
    if cfg.uid is not None:
        steps.run("uid_drop", _drop_privileges, cfg.uid, cfg.gid)
        if cfg.parent_death_signal and not in_pidns:  # a uid change clears it; init has it
            steps.run("parent_death_signal", _die_with_parent, libc, cfg.parent)
    if cfg.nproc is not None:
        nproc = (cfg.nproc, cfg.nproc)
        steps.run("process_limit", resource.setrlimit, resource.RLIMIT_NPROC, nproc)
    steps.run("no_new_privs", libc.call, "prctl", _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    steps.run("not_dumpable", libc.call, "prctl", _PR_SET_DUMPABLE, 0, 0, 0, 0)
    if cfg.landlock_read is not None:
        steps.run("landlock", libc.landlock, cfg.landlock_read, (cfg.workdir, "/dev/null"))
    if cfg.supervise:
        steps.run("supervisor", _supervise_program, cfg.report_fd)
    role = _split(cfg) if cfg.driver_fd is not None else None
    if cfg.audit_hook:
        steps.run("audit_hook", sys.addaudithook, _make_hook(cfg.workdir))
    for name in [m for m in sys.modules if m == "ctypes" or m.startswith(("ctypes.", "_ctypes"))]:
        del sys.modules[name]  # so that the program's import of ctypes meets the audit hook
    for name in cfg.unset_env:
        os.environ.pop(name, None)
    return role


def _run_program(source):
    """Run the program as ``__main__``; returns its namespace if it runs to the end. Errors are
    printed without the bootstrap's frames: a program that does not compile leaves with
    ``EXIT_SYNTAX``, a MemoryError with ``EXIT_MEMORY``, any other exception with 1, and
    ``SystemExit`` keeps its meaning (``exit()`` and ``quit()`` raise it, as with ``site``)."""
    main = type(sys)("__main__")
    sys.modules["__main__"] = main
    import builtins  # ``-S`` skips ``site``, which defines ``exit`` and ``quit``

    builtins.exit = builtins.quit = sys.exit
    sys.argv = ["solution.py"]
    try:
        code = compile(source, "solution.py", "exec")
    except (SyntaxError, ValueError, RecursionError) as exc:
        sys.excepthook(type(exc), exc.with_traceback(None), None)
        sys.exit(EXIT_SYNTAX)
    try:
        exec(code, main.__dict__)
    except MemoryError:
        os.write(2, b"MemoryError\n")
        try:
            sys.stdout.flush()
        finally:
            os._exit(EXIT_MEMORY)
    except Exception as exc:  # the program's own failure, reported as such
        tb = exc.__traceback__.tb_next
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        sys.exit(1)
    return main.__dict__


def main():
    cfg = SimpleNamespace(**marshal.loads(bytes.fromhex(sys.argv[2])))  # the parent's ChildConfig
    os.write(cfg.report_fd, b"1")
    report_fd = cfg.report_fd
    source = _read_all(cfg.code_fd)
    steps = _Steps(cfg.probe)
    role = _setup(cfg, steps)
    if cfg.probe:
        steps.run("usable", _check_usable)
        if steps.report.get("landlock") is True:
            steps.run("landlock_denies", _check_landlock_denies)
        sys.stdout.write(repr(steps.report) + "\n")
        return
    del cfg, steps
    if role is not None and role[0] == "driver":
        os.close(report_fd)
        del source
        _drive(*role[1:])
        return
    os.write(report_fd, b"2")
    os.close(report_fd)
    namespace = _run_program(source)
    if role is not None:
        _serve(namespace, *role[1:])


if __name__ == "__main__":
    main()
