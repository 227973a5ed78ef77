"""``rlvr.train.interrupt``: a first signal asks a run to stop after its step in flight, a
second stops it at once; the study runner's ask (:func:`ask_to_stop`) is idempotent."""

import os
import signal

import pytest

from rlvr.train.interrupt import Stopped, StopRequest, ask_to_stop, stop_asked


def _signal(signum: int) -> None:
    """Send ``signum`` to this process; its handler runs before the next bytecode."""
    os.kill(os.getpid(), signum)
    signal.getsignal(signum)  # a bytecode boundary: the handler has run


def test_a_first_signal_asks_and_a_second_stops_at_once(capsys):
    with StopRequest() as stop:
        _signal(signal.SIGTERM)
        assert stop.asked and stop.signum == signal.SIGTERM and stop_asked()
        assert "SIGTERM: stopping after the step in flight" in capsys.readouterr().err
        with pytest.raises(Stopped):
            _signal(signal.SIGTERM)  # SIGTERM: a shell may start the tests with SIGINT ignored
    assert not stop_asked() and not ask_to_stop(signal.SIGINT)  # no run in progress


def test_the_runners_ask_is_idempotent_and_no_first_signal(capsys):
    """A scheduler's SIGTERM and the runner's ask, in either order, leave one request to stop
    after the step in flight; a signal after both is the second."""
    with StopRequest() as stop:
        assert ask_to_stop(signal.SIGINT) and stop.asked
        assert ask_to_stop(signal.SIGINT)  # again: nothing more
        assert capsys.readouterr().err.count("stopping after the step in flight") == 1
        _signal(signal.SIGTERM)  # the scheduler's, after the runner's ask: still the first
        assert stop.signum == signal.SIGTERM
        with pytest.raises(Stopped):
            _signal(signal.SIGTERM)
    with StopRequest() as stop:
        _signal(signal.SIGTERM)
        ask_to_stop(signal.SIGINT)  # the runner's, after the scheduler's: ignored
        assert stop.asked and stop.signum == signal.SIGTERM
