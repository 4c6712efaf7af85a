"""Ending the proxy's open requests when it stops.

Told to stop, uvicorn waits for every open request to end: a stream from an upstream that
stalls kept ``autocompact serve`` running, silent, for up to ``--timeout`` (600 s), and a second
Ctrl-C cancelled the requests where they stood, each with a traceback. :class:`Stopper` lets the
server end them instead (``autocompact serve`` does once they had a few seconds to finish): a
request with no answer yet gets a 503, a stream the protocol's error event, each saying that the
proxy stopped; what a request holds (its compaction lease, the upstream's connection) is given
back as when its client hangs up.

Every wait that :meth:`Stopper.stop` ends runs in a scope of :meth:`Stopper.ending` (the
handler before its answer, each read of a stream's next chunk: never across a ``yield``, where
a cancel scope must not be left open).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

__all__ = ["STOPPED", "Stopped", "Stopper"]

STOPPED = (
    "autocompact serve was stopped while this request was open; send it again once the proxy runs"
)
"""What the client of a request the stop ended is told (with what to do)."""


class Stopped(Exception):
    """The proxy was stopped while the request waited."""


class Stopper:
    """The scopes of the waits the proxy's stop ends; one per app."""

    def __init__(self) -> None:
        self.stopped = False
        self._scopes: set[anyio.CancelScope] = set()

    def stop(self) -> None:
        """End every open wait now, and any that begins later at once (called in the app's
        event loop)."""
        self.stopped = True
        for scope in list(self._scopes):
            scope.cancel()

    @contextmanager
    def ending(self) -> Iterator[None]:
        """A wait that :meth:`stop` ends.

        Raises:
            Stopped: after the wait was ended (its scope caught the cancellation).
        """
        with anyio.CancelScope() as scope:
            if self.stopped:
                scope.cancel()
            self._scopes.add(scope)
            try:
                yield
            finally:
                self._scopes.discard(scope)
        if scope.cancelled_caught:
            raise Stopped
