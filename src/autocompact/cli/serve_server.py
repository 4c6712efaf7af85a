"""uvicorn's server as ``autocompact serve`` runs it: told to stop while requests are open, it
says how many and how long they get, then ends them; no traceback.

uvicorn, told to stop (Ctrl-C, SIGTERM), waits for every open request to end and says so only
at INFO, below the proxy's uvicorn log level: a stream from an upstream that stalls kept the
proxy running, silent, for up to ``--timeout`` (600 s). A second Ctrl-C made uvicorn give up
the wait and leave the requests to the cancellation that ends its event loop, each with a
traceback (one more for the app's lifespan). Here the open requests get :data:`STOP_GRACE`
seconds (a second Ctrl-C, or a second SIGTERM, ends the wait at once); then the app ends them
(:meth:`~autocompact.serve.ServeApp.stop`: a 503, or the protocol's error event in a stream,
saying that the proxy stopped), and they give back what they hold before the process exits.

SIGTERM (``kill``, ``docker stop``, systemd) stops it as Ctrl-C does, and the process exits 0:
uvicorn sends the signal again once it stopped, to the handler that was there before it, and
with the default one the process was killed by it (status 143, -15 to ``subprocess``), after
the clean stop, with nothing said (:func:`terminated_as_exit`).

Imported only once uvicorn is known to be installed (``autocompact[serve]``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

import uvicorn

__all__ = [
    "ENDING_SECONDS",
    "STOP_GRACE",
    "QuietCancellation",
    "StoppingServer",
    "Terminated",
    "terminated_as_exit",
]

STOP_GRACE = 5
"""Seconds the open requests get to end when the proxy is told to stop."""
ENDING_SECONDS = 10.0
"""Seconds the requests the stop ended get to give back what they hold (a compaction lease,
the upstream's connection) before the process exits without them."""


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _requests(count: int) -> str:
    return f"{count} open request{'s' if count != 1 else ''}"


class Terminated(Exception):
    """SIGTERM came while :func:`terminated_as_exit` was in force."""


@contextmanager
def terminated_as_exit() -> Iterator[None]:
    """While in force, SIGTERM raises :class:`Terminated` for the caller to end on (exit 0):
    uvicorn's server, once stopped, sends the SIGTERM it stopped on again, to the handler that
    was in force before its own, and the default one killed the process. Outside the main
    thread, where no handler can be set (as uvicorn's), nothing changes."""

    def terminated(sig: int, frame: FrameType | None) -> None:
        raise Terminated

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


_CANCELLED = "Cancel %s running task(s), timeout graceful shutdown exceeded"
"""uvicorn's ERROR record when it cancels the requests that outlasted the stop."""


class QuietCancellation(logging.Filter):
    """Drops uvicorn's report of a request cancelled as the server stops (a ``CancelledError``
    and its traceback, logged as "Exception in ASGI application"): uvicorn cancels the requests
    that outlast the stop (``--workers N``: after :data:`STOP_GRACE` seconds), which is no
    failure of the app. Its ERROR line saying how many it cancels ("timeout graceful shutdown
    exceeded") is said instead as a plain line, as the proxy's own stop says it. Any other
    error it logs is kept.

    Args:
        say: writes a line for the person who stopped the proxy (stderr).
    """

    def __init__(self, say: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.say = say or _say

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` is kept."""
        if record.msg == _CANCELLED and isinstance(record.args, tuple) and record.args:
            count = record.args[0]
            ended = _requests(count) if isinstance(count, int) else "the open requests"
            whose = "its client sees" if count == 1 else "their clients see"
            self.say(
                f"Ending {ended} of worker {os.getpid()} after {STOP_GRACE} s: {whose} the "
                "connection close"
            )
            return False
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, asyncio.CancelledError)


class StoppingServer(uvicorn.Server):
    """uvicorn's server, stopping as described in the module docstring.

    Args:
        config: uvicorn's configuration.
        stop: ends the app's open requests (:meth:`~autocompact.serve.ServeApp.stop`).
        grace: seconds the open requests get to end before ``stop`` is called.
        say: writes a line for the person who stopped the proxy (stderr).
    """

    def __init__(
        self,
        config: uvicorn.Config,
        *,
        stop: Callable[[], None],
        grace: float = STOP_GRACE,
        say: Callable[[str], None] = _say,
    ) -> None:
        super().__init__(config)
        self.stop_app = stop
        self.grace = grace
        self.say = say
        self.signalled: int | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """uvicorn's, and a second SIGTERM ends the wait as a second Ctrl-C does (uvicorn's
        waited on)."""
        repeated = self.should_exit
        if self.signalled is None:
            self.signalled = sig
        super().handle_exit(sig, frame)
        if repeated and sig == signal.SIGTERM:
            self.force_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown, its wait for the open requests bounded by ``grace`` (or a second
        Ctrl-C, uvicorn's ``force_exit``); then the requests still open are ended."""
        timer = None
        if waiting := len(self.server_state.tasks):
            again = "SIGTERM again" if self.signalled == signal.SIGTERM else "Ctrl-C again"
            self.say(
                f"Stopping: waiting up to {self.grace:g} s for {_requests(waiting)} to end "
                f"({again} to end {'it' if waiting == 1 else 'them'} now)"
            )
            timer = asyncio.get_running_loop().call_later(self.grace, self._enough)
        try:
            await super().shutdown(sockets)
        finally:
            if timer is not None:
                timer.cancel()
        await self._end_open()

    def _enough(self) -> None:
        """The grace is over: uvicorn's wait ends, as on a second Ctrl-C."""
        self.force_exit = True

    async def _end_open(self) -> None:
        """End the requests still open and wait (at most :data:`ENDING_SECONDS`) for them to
        finish: what the event loop's end would cancel is each a traceback, and a compaction
        lease left held until it lapses."""
        if not (still := len(self.server_state.tasks)):
            return
        self.say(f"Ending {_requests(still)}: each client is told that the proxy stopped")
        self.stop_app()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ENDING_SECONDS
        while self.server_state.tasks and loop.time() < deadline:
            await asyncio.sleep(0.05)
