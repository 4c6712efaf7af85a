"""The real llama.cpp servers, each behind a recording proxy (issue 17).

Two servers serve Gemma 3 270M (Q4_K_M) with an 8K context on 127.0.0.1: llama.cpp's C++
``llama-server`` and ``llama-cpp-python``'s ``llama_cpp.server``. ``.ci/llama.sh`` builds both
and the model and prints where they are::

    eval "$(bash .ci/llama.sh)"   # sets AUTOCOMPACT_LLAMA_SERVER_BIN, _CPP_PYTHON, _MODEL

Without those variables the suite is skipped with that hint; under ``CI=true`` it fails instead,
so CI never passes without having run it.

Both servers start once per test session (in parallel) and stop at its end. Each sits behind a
:class:`RecordingProxy` that forwards every request and keeps its body and the server's answer
(streams too), so tests assert on what autocompact sent and on what the server said about it.

"By the server's own count" means: the prompt as that server renders it (llama-server's
``/apply-template``; for ``llama_cpp.server`` its ``gemma`` chat format, re-implemented in
:func:`render_gemma_lcp` and checked against the server's ``usage`` wherever a reply has one),
tokenized by the server itself (``/tokenize``, ``/extras/tokenize``).
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

N_CTX = 8192
"""The window both servers are started with."""

ENV_SERVER = "AUTOCOMPACT_LLAMA_SERVER_BIN"
ENV_PYTHON = "AUTOCOMPACT_LLAMA_CPP_PYTHON"
ENV_MODEL = "AUTOCOMPACT_LLAMA_MODEL"
ENV_PIDS = "AUTOCOMPACT_LLAMA_PID_DIR"
NO_SERVERS = (
    f"no llama.cpp servers: set {ENV_SERVER}, {ENV_PYTHON} and {ENV_MODEL} "
    '(eval "$(bash .ci/llama.sh)" builds them once and prints them; .ci/run does this)'
)
START_TIMEOUT = 240.0
"""Seconds a server may take to load the model (the machine may be busy)."""
REQUEST_TIMEOUT = 3600.0
"""Seconds one request may take: a full 8K prompt on one busy core can take a quarter hour."""

HERE = Path(__file__).parent


def llama_env() -> tuple[str, str, str]:
    """The server binary, the Python with llama_cpp.server, the model; or skip (fail in CI)."""
    values = tuple(os.environ.get(name, "") for name in (ENV_SERVER, ENV_PYTHON, ENV_MODEL))
    if all(values):
        missing = [v for v in values if not Path(v).exists()]
        if missing:
            pytest.fail(f"{NO_SERVERS}; these do not exist: {', '.join(missing)}")
        return values[0], values[1], values[2]
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {NO_SERVERS}")
    pytest.skip(NO_SERVERS)


# -- the recording proxy ---------------------------------------------------------------------


@dataclass
class Exchange:
    """One request through the proxy and the server's answer."""

    method: str
    path: str
    request: Any
    status: int
    body: bytes
    raw: bytes = b""
    """The request's body bytes as received."""

    @property
    def is_chat(self) -> bool:
        return self.path.rstrip("/").endswith("/chat/completions")

    @property
    def streamed(self) -> bool:
        return isinstance(self.request, dict) and bool(self.request.get("stream"))

    def reply(self) -> Any:
        """The answer as JSON (``None`` when it is not JSON, e.g. a stream)."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def events(self) -> list[Any]:
        """A stream's ``data:`` events, parsed (``[DONE]`` left out)."""
        out = []
        for line in self.body.decode("utf-8", "replace").splitlines():
            if line.startswith("data:"):
                data = line[5:].strip()
                if data and data != "[DONE]":
                    out.append(json.loads(data))
        return out

    def usage_prompt_tokens(self) -> int | None:
        """The server's prompt count in its answer, when it gave one."""
        if self.status != 200:
            return None
        if self.streamed:
            for event in self.events():
                usage = event.get("usage")
                if usage:
                    return int(usage["prompt_tokens"])
            return None
        reply = self.reply()
        if isinstance(reply, dict) and reply.get("usage"):
            return int(reply["usage"]["prompt_tokens"])
        return None

    def text(self) -> str:
        """The reply's text (streams joined)."""
        if self.streamed:
            return "".join(
                (choice.get("delta") or {}).get("content") or ""
                for event in self.events()
                for choice in event.get("choices") or []
            )
        reply = self.reply()
        if not isinstance(reply, dict) or not reply.get("choices"):
            return ""
        return str(reply["choices"][0]["message"].get("content") or "")

    def finish_reason(self) -> str | None:
        if self.streamed:
            reasons = [
                choice.get("finish_reason")
                for event in self.events()
                for choice in event.get("choices") or []
                if choice.get("finish_reason")
            ]
            return reasons[-1] if reasons else None
        reply = self.reply()
        if not isinstance(reply, dict) or not reply.get("choices"):
            return None
        return reply["choices"][0].get("finish_reason")


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    upstream: tuple[str, int]
    exchanges: list[Exchange]
    lock: threading.Lock


class _ProxyHandler(BaseHTTPRequestHandler):
    server: _ProxyServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        """Keep the test output clean."""

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {
            k: v
            for k, v in self.headers.items()
            if k.lower() in ("content-type", "authorization", "accept")
        }
        host, port = self.server.upstream
        conn = http.client.HTTPConnection(host, port, timeout=REQUEST_TIMEOUT)
        try:
            conn.request(self.command, self.path, body=raw or None, headers=headers)
            answer = conn.getresponse()
            body = answer.read()
            status = answer.status
            content_type = answer.getheader("Content-Type") or "application/octet-stream"
        except OSError as exc:  # the server died or hung up: say so, as a 502
            body = json.dumps({"error": {"message": f"proxy: upstream failed: {exc}"}}).encode()
            status, content_type = 502, "application/json"
        finally:
            conn.close()
        try:
            request: Any = json.loads(raw) if raw else None
        except ValueError:
            request = raw
        with self.server.lock:
            self.server.exchanges.append(
                Exchange(self.command, self.path, request, status, body, raw)
            )
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = _forward
    do_POST = _forward


class RecordingProxy:
    """A threaded HTTP proxy on 127.0.0.1 that records every exchange with one upstream."""

    def __init__(self, upstream_port: int) -> None:
        self._server = _ProxyServer(("127.0.0.1", 0), _ProxyHandler)
        self._server.upstream = ("127.0.0.1", upstream_port)
        self._server.exchanges = []
        self._server.lock = threading.Lock()
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def exchanges(self) -> list[Exchange]:
        with self._server.lock:
            return list(self._server.exchanges)

    def mark(self) -> int:
        """A position to read later exchanges from (:meth:`since`)."""
        return len(self.exchanges)

    def since(self, mark: int) -> list[Exchange]:
        return self.exchanges[mark:]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


# -- the servers -----------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the test process dies, however it dies (Linux)."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def http_json(url: str, body: object | None = None, timeout: float = REQUEST_TIMEOUT) -> Any:
    """GET (or POST ``body``) ``url`` directly, without the proxy; the answer as JSON."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=timeout) as answer:
        return json.loads(answer.read())


def render_gemma_lcp(messages: Sequence[Mapping[str, Any]]) -> str:
    """The prompt ``llama_cpp.server --chat_format gemma`` builds (``format_gemma``).

    Its formatter drops system messages (Gemma has no system role; it logs that and moves on),
    reads only string contents, and ends with an open model turn. The tokenizer adds ``<bos>``.
    """
    roles = {"user": "<start_of_turn>user\n", "assistant": "<start_of_turn>model\n"}
    out = ""
    for message in messages:
        role = message.get("role")
        if role not in roles:
            continue
        content = message.get("content")
        out += roles[role] + (content if isinstance(content, str) else "") + "<end_of_turn>\n"
    return out + roles["assistant"]


@dataclass
class LlamaServer:
    """One running server and the proxy in front of it."""

    kind: str  # "llama-server" or "llama_cpp.server"
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    proxy: RecordingProxy = field(init=False)

    def __post_init__(self) -> None:
        self.proxy = RecordingProxy(self.port)

    @property
    def direct(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL through the recording proxy."""
        return f"http://127.0.0.1:{self.proxy.port}/v1"

    @property
    def model(self) -> str:
        return "gemma3-270m"

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])

    def alive(self) -> bool:
        return self.process.poll() is None

    def tokenize(self, text: str) -> int:
        """How many tokens the server makes of ``text`` (special tokens parsed, ``<bos>`` added
        as for a prompt)."""
        if self.kind == "llama-server":
            reply = http_json(
                self.direct + "/tokenize",
                {"content": text, "add_special": True, "parse_special": True},
            )
            return len(reply["tokens"])
        reply = http_json(self.direct + "/extras/tokenize", {"input": text})
        return len(reply["tokens"])

    def render(self, request: Mapping[str, Any]) -> str:
        """The prompt this server builds from a chat-completions body."""
        if self.kind == "llama-server":
            reply = http_json(self.direct + "/apply-template", {"messages": request["messages"]})
            return str(reply["prompt"])
        return render_gemma_lcp(request["messages"])

    def count(self, request: Mapping[str, Any]) -> int:
        """The prompt size of a chat-completions body by the server's own count."""
        return self.tokenize(self.render(request))


def _wait_ready(server: LlamaServer, path: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        if not server.alive():
            raise RuntimeError(
                f"{server.kind} exited with {server.process.returncode} while starting; "
                f"its log ({server.log}) ends with:\n{server.log_tail()}"
            )
        try:
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                server.direct + path, timeout=5
            ) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(
        f"{server.kind} did not answer {path} within {START_TIMEOUT:.0f}s; its log "
        f"({server.log}) ends with:\n{server.log_tail()}"
    )


def _launch(kind: str, argv: list[str], port: int, log: Path) -> LlamaServer:
    handle = log.open("wb")
    process = subprocess.Popen(
        argv,
        stdout=handle,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        preexec_fn=_die_with_parent,
        env={**os.environ, "NO_PROXY": "127.0.0.1", "PYTHONUNBUFFERED": "1"},
    )
    handle.close()
    pid_dir = os.environ.get(ENV_PIDS)
    if pid_dir:  # .ci/run kills what is listed here on exit, whatever happened to pytest
        Path(pid_dir).mkdir(parents=True, exist_ok=True)
        (Path(pid_dir) / f"{process.pid}.pid").write_text(str(process.pid))
    return LlamaServer(kind=kind, process=process, port=port, log=log)


def _stop(server: LlamaServer) -> None:
    server.proxy.close()
    if server.alive():
        server.process.terminate()
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(timeout=15)
    pid_dir = os.environ.get(ENV_PIDS)
    if pid_dir:
        (Path(pid_dir) / f"{server.process.pid}.pid").unlink(missing_ok=True)


@dataclass
class LlamaServers:
    """Both servers, by kind."""

    cpp: LlamaServer  # llama-server
    python: LlamaServer  # llama_cpp.server

    def all(self) -> list[LlamaServer]:
        return [self.cpp, self.python]


@pytest.fixture(scope="session")
def llama_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServers]:
    """Start llama-server and llama_cpp.server (8K context, one thread each) and stop them."""
    server_bin, python, model = llama_env()
    logs = tmp_path_factory.mktemp("llama-logs")
    cpp_port, py_port = _free_port(), _free_port()
    cpp = _launch(
        "llama-server",
        [
            server_bin,
            "--model", model,
            "--ctx-size", str(N_CTX),
            "--host", "127.0.0.1",
            "--port", str(cpp_port),
            # A base model has no chat template: use llama.cpp's built-in Gemma one.
            "--no-jinja", "--chat-template", "gemma",
            "--parallel", "1",
            "--threads", "1",
            "--threads-batch", "1",
            "--seed", "0",
            "--no-repack",  # see lcp_server.py
            "--no-webui",
        ],
        cpp_port,
        logs / "llama-server.log",
    )  # fmt: skip
    py = _launch(
        "llama_cpp.server",
        [
            python,
            str(HERE / "lcp_server.py"),
            "--model", model,
            "--n_ctx", str(N_CTX),
            "--host", "127.0.0.1",
            "--port", str(py_port),
            "--chat_format", "gemma",
            "--n_threads", "1",
            "--n_threads_batch", "1",
            "--seed", "0",
        ],
        py_port,
        logs / "llama_cpp.server.log",
    )  # fmt: skip
    servers = LlamaServers(cpp=cpp, python=py)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        _wait_ready(cpp, "/health", deadline)
        _wait_ready(py, "/v1/models", deadline)
        yield servers
    finally:
        for server in servers.all():
            _stop(server)


@pytest.fixture
def no_http_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests to 127.0.0.1 never go through a proxy of the environment."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The suite runs last: the fast tests report first."""
    ours = [i for i in items if "integration_llama" in str(i.fspath)]
    rest = [i for i in items if "integration_llama" not in str(i.fspath)]
    items[:] = rest + ours
