"""``autocompact serve``: run the compaction proxy (``pip install "autocompact[serve]"``)."""

from __future__ import annotations

import argparse
import contextlib
import errno
import inspect
import json
import logging
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from autocompact.errors import ConfigError, MissingDependencyError
from autocompact.thresholds import SMALLEST_WINDOW, parse_window

__all__ = ["CONFIG_ENV", "app_from_env", "register", "run"]

CONFIG_ENV = "AUTOCOMPACT_SERVE_CONFIG"
"""How ``--workers N`` hands the configuration to each worker process (JSON)."""
STORE_ENV = "AUTOCOMPACT_STORE"

EPILOG = """\
Point your agent at the proxy (port 8787 here):
  Claude Code        ANTHROPIC_BASE_URL=http://127.0.0.1:8787 claude
  Anthropic SDK      anthropic.Anthropic(base_url="http://127.0.0.1:8787")
  OpenAI SDK         openai.OpenAI(base_url="http://127.0.0.1:8787/v1")
  Codex              a model provider with base_url = "http://127.0.0.1:8787/v1"
  aider              aider --openai-api-base http://127.0.0.1:8787/v1
                     (or ANTHROPIC_BASE_URL for Anthropic models)
  llama.cpp          autocompact serve --upstream openai=http://127.0.0.1:8080/v1
                     (the window is read from the server's /props or /v1/models)
Credentials stay the client's: the proxy forwards them and never stores or logs them.
See docs/serve.md.
"""


def _upstream(value: str) -> tuple[str, str]:
    name, sep, url = value.partition("=")
    if not sep or name not in ("openai", "anthropic") or not url:
        raise argparse.ArgumentTypeError(f"expected openai=URL or anthropic=URL, got {value!r}")
    return name, url


def _window(value: str) -> int:
    """``--context-window``: at least :data:`SMALLEST_WINDOW`, as ``chat --window`` (a window
    of 100 tokens started the proxy, and no real request fitted)."""
    try:
        return parse_window(value, name="--context-window", minimum=SMALLEST_WINDOW)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from exc
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a number ≥ 1, got {number}")
    return number


def _port(value: str) -> int:
    number = _positive(value)
    if number > 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, got {number}")
    return number


def _host(value: str) -> str:
    """``--host``: an address this machine can resolve (uvicorn exited 3 on it, naming no
    option)."""
    try:
        socket.getaddrinfo(value, None)
    except (OSError, UnicodeError) as exc:
        raise argparse.ArgumentTypeError(
            f"{value!r:.60} is not an address to listen on ({exc}); give an IP address such "
            "as 127.0.0.1 or 0.0.0.0, or a host name this machine resolves"
        ) from exc
    return value


def _url_host(host: str) -> str:
    """``host`` as a URL writes it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


def _log_level(value: str) -> str:
    levels = [name.lower() for name in logging.getLevelNamesMapping()]
    if value.strip().lower() not in levels:
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(sorted(levels))}, got {value!r:.40}"
        )
    return value.strip()


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``serve`` command."""
    parser = subparsers.add_parser(
        "serve",
        help="run the compaction proxy for agents you did not write",
        description="Run an HTTP proxy between an agent and its model server that compacts "
        "the conversation at the auto threshold and replays the same compacted prefix on "
        "every later request (OpenAI chat completions, Responses, Anthropic messages).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--upstream",
        action="append",
        type=_upstream,
        default=[],
        metavar="NAME=URL",
        help="openai=URL and/or anthropic=URL: where requests go (one at least, each once)",
    )
    parser.add_argument("--host", type=_host, default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=_port, default=8787, help="port (default 8787)")
    parser.add_argument(
        "--store",
        help="session store for the compactions: sqlite:///path (or a path ending in .db, "
        ".sqlite, .sqlite3), postgresql://…, or a directory for JSONL files (default: "
        f"${STORE_ENV}, else serve.db in the user data directory)",
    )
    parser.add_argument(
        "--context-window",
        type=_window,
        help="the window in tokens of every model, in place of the model table's and the "
        "server's (e.g. 128k; at least 1k)",
    )
    parser.add_argument("--workers", type=_positive, default=1, help="worker processes")
    parser.add_argument(
        "--max-body-bytes",
        type=_positive,
        default=32 * 1024 * 1024,
        help="largest request body (the client's own compaction is exempt)",
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds to wait for the upstream"
    )
    parser.add_argument(
        "--lease-seconds",
        type=float,
        help="how long a compaction lease lasts (a worker killed mid-compaction holds its "
        "conversation's lease this long; default: --side-query-timeout plus 30)",
    )
    parser.add_argument(
        "--side-query-timeout",
        type=float,
        default=300.0,
        help="seconds to wait for one summary request (default 300)",
    )
    parser.add_argument(
        "--summary-target-tokens",
        type=_positive,
        help="the summary's target size and so the summary request's output cap (default: "
        "the engine's; a small local model that runs on to its cap is faster with e.g. 400)",
    )
    parser.add_argument(
        "--keep-share",
        type=float,
        default=0.3,
        help="share of the history a compaction keeps verbatim (default 0.3)",
    )
    parser.add_argument(
        "--log-level", type=_log_level, default="info", help="log level (default info)"
    )
    parser.set_defaults(handler=run)


def _upstreams(given: list[tuple[str, str]]) -> dict[str, str]:
    """The ``--upstream`` options as a mapping; an upstream named twice with two URLs is
    refused (the last one was used, silently)."""
    upstreams: dict[str, str] = {}
    for name, url in given:
        if upstreams.get(name, url) != url:
            raise ConfigError(
                f"--upstream {name}= is given twice, {upstreams[name]} and {url}: give each "
                "upstream once",
                key="upstream",
            )
        upstreams[name] = url
    return upstreams


def _default_store() -> str:
    import platformdirs

    directory = Path(platformdirs.user_data_dir("autocompact", appauthor=False))
    directory.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{directory / 'serve.db'}"


def _config(data: dict[str, Any]) -> Any:
    try:
        from autocompact.serve import ServeConfig
    except ImportError as exc:
        raise MissingDependencyError(exc.name or "starlette", "serve") from exc
    return ServeConfig(**data)


_LOOPBACK = ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::")


def _check_not_itself(upstreams: dict[str, str], host: str, port: int) -> None:
    """Refuse an upstream that is the proxy's own address: every request went to the proxy
    again, each waiting on the next until ``--timeout`` (600 s by default) ended them."""
    from urllib.parse import urlsplit

    for name, url in upstreams.items():
        parts = urlsplit(url)
        try:
            target = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:  # a port that is no number: the request says so
            continue
        there = (parts.hostname or "").lower()
        if target == port and (there == host.lower() or {there, host} <= set(_LOOPBACK)):
            raise ConfigError(
                f"the {name} upstream {url} is this proxy itself (--host {host} --port "
                f"{port}): point --upstream {name}=URL at the model server, or give the "
                "proxy another --port",
                key="upstream",
            )


def _check_store(address: str, flag: str) -> str:
    """Open the store once before serving, as ``GET /healthz`` does; what it is, as the start
    line says it (``SQLite file /abs/path``: what ``--store`` became).

    A store that cannot be opened or written made every request go out uncompacted (each with
    an error in the log), with nothing said at start. A SQLite file or JSONL directory that
    cannot be used is refused; a PostgreSQL server that does not answer yet is warned about
    (it may be starting: the proxy uses it once it answers, ``/healthz`` says when).
    """
    from autocompact.errors import SessionStoreError
    from autocompact.sessions.stores import open_store, redact_address
    from autocompact.sessions.stores.address import parse_store_address
    from autocompact.sessions.stores.base import is_keyword_dsn
    from autocompact.sessions.stores.sqlite import READ_ONLY_HINT

    shown, _ = redact_address(address)
    try:
        parsed = None if is_keyword_dsn(address) else parse_store_address(address, shown=shown)
    except SessionStoreError as exc:  # (the address may be $AUTOCOMPACT_STORE's: say so)
        raise ConfigError(f"{flag}: {exc}", key=flag) from exc
    remote = parsed is None or parsed.kind == "postgresql"
    if parsed is not None and parsed.read_only:
        raise ConfigError(
            f"the store {shown} is opened read-only (?mode=ro), and the proxy writes its "
            f"compactions there: give {flag} without ?mode=ro",
            key=flag,
        )
    store = open_store(address)
    try:
        if parsed is not None and parsed.kind == "jsonl":  # (its exists() writes nothing)
            try:
                os.makedirs(parsed.location, exist_ok=True)
                with tempfile.TemporaryFile(dir=parsed.location):
                    pass
            except OSError as exc:
                raise SessionStoreError(
                    f"cannot write to the JSONL directory {parsed.location} "
                    f"({exc.strerror or exc})",
                    store=shown,
                ) from exc
        store.exists("serve:healthz")
    except SessionStoreError as exc:
        if not remote:  # (not "add ?mode=ro": the proxy writes)
            reason = str(exc).replace(READ_ONLY_HINT, "")
            raise ConfigError(
                f"the store {shown} cannot be used: {reason}; give {flag} a SQLite file (or a "
                "directory) the proxy can write",
                key=flag,
            ) from exc
        print(
            f"Warning: the store {shown} does not answer yet ({exc}); requests go out "
            "uncompacted until it does (GET /healthz answers 200 once it does)",
            file=sys.stderr,
        )
    finally:
        store.close()
    if parsed is None or parsed.kind == "postgresql":
        return f"PostgreSQL {shown}"
    return f"{'SQLite file' if parsed.kind == 'sqlite' else 'JSONL directory'} {parsed.location}"


def _log_to_stderr(level: str) -> None:
    """The proxy's log on stderr from ``level`` up (in each worker of ``--workers N`` too)."""
    logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("autocompact").setLevel(level.upper())


def app_from_env() -> Any:
    """The ASGI app of one worker under ``--workers N`` (uvicorn's factory)."""
    from autocompact.serve import create_app

    data = json.loads(os.environ[CONFIG_ENV])
    _log_to_stderr(data.pop("log_level", "info"))
    _quiet_cancellations()
    return create_app(_config(data))


def _quiet_cancellations() -> None:
    """No traceback for a request the stop cancelled (:class:`QuietCancellation`)."""
    from autocompact.cli.serve_server import QuietCancellation

    logging.getLogger("uvicorn.error").addFilter(QuietCancellation())


def run(args: argparse.Namespace) -> int:
    """Start the proxy and serve until interrupted."""
    if not args.upstream:
        raise ConfigError(
            "give one upstream at least: --upstream openai=URL or --upstream anthropic=URL",
            key="upstream",
        )
    try:
        import uvicorn  # noqa: F401  (the extra is there before anything is checked)
    except ImportError as exc:
        raise MissingDependencyError("uvicorn", "serve") from exc
    if args.store is not None and not args.store.strip():  # not the default store, silently
        raise ConfigError(
            f"--store is empty ({args.store!r}): give sqlite:///path or postgresql://…, or "
            f"leave --store out for ${STORE_ENV} or serve.db in the user data directory",
            key="--store",
        )
    flag = f"${STORE_ENV}" if not args.store and os.environ.get(STORE_ENV) else "--store"
    origin = flag if args.store or os.environ.get(STORE_ENV) else "the default"
    data = {
        "upstreams": _upstreams(args.upstream),
        "store": args.store or os.environ.get(STORE_ENV) or _default_store(),
        "context_window": args.context_window,
        "max_body_bytes": args.max_body_bytes,
        "timeout": args.timeout,
        "lease_seconds": args.lease_seconds,
        "side_query_timeout": args.side_query_timeout,
        "summary_target_tokens": args.summary_target_tokens,
        "keep_share": args.keep_share,
    }
    config = _config(data)  # checks the values before any worker starts
    _check_not_itself(dict(config.upstreams), args.host, args.port)
    store = _check_store(config.store, flag)
    sock = _listen(args.host, args.port)  # before the banner: it is true once printed
    try:
        _log_to_stderr(args.log_level)
        print(
            f"autocompact serve on http://{_url_host(args.host)}:{args.port} → "
            + ", ".join(f"{k}={v}" for k, v in sorted(config.upstreams.items()))
            + f"\n  store: {store} ({origin})",
            file=sys.stderr,
        )
        if args.workers > 1:
            os.environ[CONFIG_ENV] = json.dumps({**data, "log_level": args.log_level})
        return _serve(sock, config, args.workers)
    finally:
        sock.close()


def _listen(host: str, port: int) -> socket.socket:
    """The socket the proxy serves on, bound and listening (as uvicorn binds one).

    Bound here, before the banner, so that a port in use is one line naming it and what to do
    (the banner was printed, then uvicorn's bind error, exit 3).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)  # uvicorn's default backlog
    except OSError as exc:
        sock.close()
        where = f"{_url_host(host)}:{port}"
        if exc.errno == errno.EADDRINUSE:
            why = (
                "the address is already in use (another program, or another autocompact "
                "serve, listens there): give another --port, or stop the process using it"
            )
        elif exc.errno == errno.EACCES:
            why = "permission denied (ports below 1024 need privileges): give a --port ≥ 1024"
        elif exc.errno == errno.EADDRNOTAVAIL:
            why = "the address is not one of this machine's: give a --host it has"
        else:
            why = f"{exc.strerror or exc}: check --host and --port"
        raise ConfigError(f"cannot listen on {where}: {why}", key="--port") from exc
    sock.set_inheritable(True)  # (the workers of --workers N serve on it)
    return sock


def _serve(sock: socket.socket, config: Any, workers: int) -> int:
    """Serve on ``sock`` until interrupted (Ctrl-C or SIGTERM: either stop is clean, says so in
    one line and exits 0): the app in this process, or ``workers`` worker processes that each
    build it from :data:`CONFIG_ENV` (:func:`app_from_env`)."""
    import uvicorn

    from autocompact.cli.serve_server import (
        STOP_GRACE,
        StoppingServer,
        Terminated,
        terminated_as_exit,
    )

    if workers == 1:
        from autocompact.serve import ServeApp

        app = ServeApp(config)
        # No lifespan: the app has none, and uvicorn's own waited on it, a traceback when the
        # stop cancelled it.
        server = StoppingServer(
            uvicorn.Config(app.asgi, log_level="warning", lifespan="off"), stop=app.stop
        )
        _quiet_cancellations()
        try:
            with terminated_as_exit():
                server.run(sockets=[sock])
        except (KeyboardInterrupt, Terminated):
            pass
        if not server.started:
            return 1
        print("autocompact serve stopped", file=sys.stderr)
        return 0
    from uvicorn.supervisors import Multiprocess

    # Each worker gives its open requests STOP_GRACE seconds, then uvicorn cancels them
    # (quietly, said in one line: app_from_env); the worker's uvicorn server is uvicorn's own.
    settings = uvicorn.Config(
        "autocompact.cli.serve_cmd:app_from_env",
        factory=True,
        workers=workers,
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=STOP_GRACE,
    )
    # What uvicorn.run does with workers, on our socket; before uvicorn 0.51 the supervisor
    # also takes each worker's target.
    extra: dict[str, Any] = {}
    if "target" in inspect.signature(Multiprocess).parameters:
        extra["target"] = uvicorn.Server(settings).run
    with contextlib.suppress(KeyboardInterrupt):
        Multiprocess(settings, sockets=[sock], **extra).run()
    print("autocompact serve stopped", file=sys.stderr)
    return 0
