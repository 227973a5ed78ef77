"""A test driver for assert tests (stdlib only; runs inside the sandbox).

A caller sends this file's text as the ``driver`` of :func:`rlvr.sandbox.run_untrusted`,
followed by one call of :func:`run`. It runs in the run's second interpreter, which no
program code has touched: the test's set-up and the test run here with Python's own
semantics, each name of the program the test uses a stub calling the program's function
through ``call_program`` (plain data in and out); the verdict goes to ``report``, a channel
the program does not hold. The bootstrap puts both names in this module's globals.
"""

_UNBOUND = object()


def _stub(target):
    def program_function(*args, **kwargs):
        return call_program(target, args, kwargs)  # noqa: F821 - given by the bootstrap

    program_function.__name__ = program_function.__qualname__ = target
    return program_function


def run(prelude, setup, statement, stubs):
    """Run ``statement`` after ``prelude`` and ``setup``, each name in ``stubs`` (test name ->
    program name) that ``setup`` did not bind calling the program (a star import or a ``def``
    under ``if`` binds names the caller's reading of it misses); report ``pass``, ``fail
    <exception>``, or ``setup <exception>: <message>`` when the set-up itself fails."""
    namespace = {"__name__": "tests"}
    exec(prelude, namespace)
    before = dict(namespace)
    try:
        exec(setup, namespace)
    except Exception as exc:  # the test's own fault: no program code has run here yet
        report(f"setup {type(exc).__name__}: {exc}")  # noqa: F821
        return
    for name, target in stubs.items():
        if namespace.get(name, _UNBOUND) is before.get(name, _UNBOUND):  # setup left it alone
            namespace[name] = _stub(target)
    try:
        exec(compile(statement, "test.py", "exec"), namespace)
    except Exception as exc:  # the test failed, however it failed
        report("fail " + type(exc).__name__)  # noqa: F821 - given by the bootstrap
    else:
        report("pass")  # noqa: F821
