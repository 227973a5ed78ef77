"""The test driver's channel: a second process of the run that calls the program through a pipe.

Part of the child bootstrap's text (after :mod:`rlvr.sandbox.plain`, before
:mod:`rlvr.sandbox.child`); the protocol is in ``docs/sandbox.md`` ("The test driver").
"""

import _signal as signal  # the C module: ``signal`` would import ``enum``
import builtins
import os

if "encode" not in globals():  # imported as a module (documentation tools), not in a run
    from rlvr.sandbox.plain import decode, encode  # in a run its text precedes this file's


def _exit_like(status):
    """Leave with the wait status ``status``: same exit code, or death by the same signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _read_all(fd):
    """Everything on ``fd`` (then closed), as text."""
    with os.fdopen(fd, "rb") as f:
        return f.read().decode("utf-8")


class ProgramUnsupported(BaseException):
    """The program answered with something the channel does not carry (not plain data, not a
    function); a BaseException so that test code catching ``Exception`` does not swallow it."""


def _split(cfg):
    """Fork into the driver's process (this one) and the program's; each gets its role and
    descriptors. The program's closes the driver's before any program code runs: it never holds
    the driver's source or its report channel."""
    requests_r, requests_w = os.pipe()
    answers_r, answers_w = os.pipe()
    program = os.fork()
    if program == 0:
        for fd in (requests_w, answers_r, cfg.driver_fd, cfg.verdict_fd):
            os.close(fd)
        return ("program", requests_r, answers_w)
    os.close(requests_r)
    os.close(answers_w)
    return ("driver", program, answers_r, requests_w, cfg.driver_fd, cfg.verdict_fd)


def _answer(namespace, line):
    """One request ``[name, args, kwargs]`` answered as ``[kind, ...]`` plain data."""
    try:
        name, args, kwargs = decode(line.decode("utf-8"))
    except (ValueError, TypeError):
        return '["unsupported", "malformed request"]'
    function = namespace.get(name)
    if function is None:
        return encode(["missing", name])
    if isinstance(function, type) or not callable(function):
        return encode(["unsupported", f"{name} is not a function"])
    try:
        value = function(*args, **kwargs)
    except Exception as exc:  # the program's own exception, sent back by class name
        return encode(["raise", type(exc).__name__, str(exc)[:200]])
    try:
        return encode(["ok", value, args])
    except (TypeError, ValueError, RecursionError) as exc:
        return encode(["unsupported", f"{name} returned {exc}"])


def _serve(namespace, requests_fd, answers_fd):
    """After the program ran: say so, then answer calls until the driver closes the pipe."""
    answers = os.fdopen(answers_fd, "wb")
    answers.write(b"ready\n")
    answers.flush()
    for line in os.fdopen(requests_fd, "rb"):
        answers.write(_answer(namespace, line).encode("utf-8") + b"\n")
        answers.flush()
    os._exit(0)


class _Channel:
    """The driver's end: calls into the program, and the report only the driver holds."""

    def __init__(self, program, answers_fd, requests_fd, verdict_fd):
        self.program = program
        self.answers = os.fdopen(answers_fd, "rb")
        self.requests = os.fdopen(requests_fd, "wb")
        self.verdict_fd = verdict_fd
        self.ready = False

    def _follow_program(self):
        """The program ended (or closed its end): leave as it did, reporting nothing more."""
        _, status = os.waitpid(self.program, 0)
        _exit_like(status)

    def _reply(self):
        line = self.answers.readline()
        if not line.endswith(b"\n"):
            self._follow_program()
        return line

    def _wait_ready(self):
        if not self.ready and self._reply() != b"ready\n":
            self._follow_program()
        self.ready = True

    def call(self, name, args=(), kwargs=None):
        """``name(*args, **kwargs)`` in the program; plain data in, plain data out."""
        self._wait_ready()
        try:
            request = encode([name, list(args), dict(kwargs or {})])
        except (TypeError, ValueError, RecursionError) as exc:  # e.g. a function as argument
            self.report(f"unsupported arguments of {name}: {exc}")
            raise ProgramUnsupported(str(exc)) from None
        try:
            self.requests.write(request.encode() + b"\n")
            self.requests.flush()
        except BrokenPipeError:
            self._follow_program()
        try:
            reply = decode(self._reply().decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            reply = ["raise", "RuntimeError", "malformed answer"]
        return self._result(reply, args)

    def _result(self, reply, args):
        kind = reply[0] if type(reply) is list and reply else None
        if kind == "ok" and len(reply) == 3 and type(reply[2]) is list:
            _write_back(args, reply[2])
            return reply[1]
        if kind == "missing":
            raise NameError(f"name {reply[1]!r} is not defined by the program")
        if kind == "raise" and len(reply) == 3 and type(reply[1]) is str:
            error = getattr(builtins, reply[1], None)
            if not (isinstance(error, type) and issubclass(error, Exception)):
                error = Exception
            elif issubclass(error, (StopIteration, StopAsyncIteration)):
                error = RuntimeError  # would end the test's loop early, as PEP 479 says
            raise error(str(reply[2]))
        why = str(reply[1]) if kind == "unsupported" and len(reply) == 2 else "malformed answer"
        self.report("unsupported " + why)
        raise ProgramUnsupported(why)

    def report(self, text):
        """Write one line to the caller's report channel, once the program has run to the end."""
        self._wait_ready()
        os.write(self.verdict_fd, text.encode("utf-8", "replace") + b"\n")


def _write_back(args, after):
    """Carry the program's changes to mutable arguments back to the test's own objects."""
    for arg, new in zip(args, after, strict=False):
        if type(arg) is list and type(new) is list:
            arg[:] = new
        elif type(arg) in (dict, set) and type(new) is type(arg):
            arg.clear()
            arg.update(new)


def _drive(program, answers_fd, requests_fd, driver_fd, verdict_fd):
    """Run the driver's source with ``call_program`` and ``report`` in its globals."""
    channel = _Channel(program, answers_fd, requests_fd, verdict_fd)
    source = _read_all(driver_fd)
    namespace = {"__name__": "driver", "call_program": channel.call, "report": channel.report}
    try:
        exec(compile(source, "driver.py", "exec"), namespace)
    finally:  # the program's process ends at the end of its requests; its CPU time counts
        channel.requests.close()
        os.waitpid(program, 0)
