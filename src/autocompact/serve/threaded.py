"""An ASGI app served by uvicorn in a background thread on a free 127.0.0.1 port.

For programs that run the proxy beside their own code in one process (a test suite, a benchmark,
a notebook): ``with serve_in_thread(create_app(config)) as url:`` gives the base URL to point a
client at; leaving the block stops the server. ``autocompact serve`` is the way to run it as a
service.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from autocompact.errors import ConfigError

__all__ = ["serve_in_thread"]


@contextmanager
def serve_in_thread(app: Any, *, start_timeout: float = 10.0) -> Iterator[str]:
    """Serve ``app`` on a free 127.0.0.1 port in a daemon thread; yield its base URL.

    Raises:
        ConfigError: the server did not start within ``start_timeout`` seconds (the app's
            startup failed; uvicorn logged why).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    try:
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise ConfigError(
                    f"the server on 127.0.0.1:{port} did not start within {start_timeout:g} s"
                )
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
