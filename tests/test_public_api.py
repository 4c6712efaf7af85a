"""The public API: ``__all__`` complete and sorted, no SDK at import, the test network guard."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

import autocompact
import autocompact.errors

FORBIDDEN = (
    "openai",
    "anthropic",
    "google.genai",
    "rich",
    "prompt_toolkit",
    "httpx",
    "langchain",
    "langchain_core",
    "langgraph",
    "pydantic_ai",
    "agents",
)


def _isort_key(name: str) -> tuple[int, str]:
    """ruff RUF022's isort-style order: CONSTANTS, then CamelCase, then the rest."""
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def test_every_name_in_all_exists() -> None:
    """Every name listed in autocompact.__all__ is importable from the package."""
    missing = [name for name in autocompact.__all__ if not hasattr(autocompact, name)]
    assert missing == []


def test_all_has_no_duplicates_and_is_sorted() -> None:
    """__all__ has no duplicates and is sorted the way the package sorts it (isort style)."""
    names = list(autocompact.__all__)
    assert len(names) == len(set(names))
    assert names == sorted(names, key=_isort_key)


@pytest.mark.parametrize(
    "name",
    [
        "Message",
        "TextPart",
        "compute_thresholds",
        "estimate_prompt_tokens",
        "Tier",
        "Provider",
        "AutocompactError",
        "SessionStore",
        "SessionStoreError",
        "open_store",
        "CompactionCancelled",
        "ContextGuard",
        "GuardState",
        "__version__",
    ],
)
def test_core_names_are_public(name: str) -> None:
    """The core names a user needs are in __all__."""
    assert name in autocompact.__all__


def test_every_error_is_an_autocompact_error() -> None:
    """Every exception class in autocompact.errors derives from AutocompactError."""
    for name in autocompact.errors.__all__:
        cls = getattr(autocompact.errors, name)
        assert issubclass(cls, autocompact.errors.AutocompactError), name


def _modules_after(statement: str) -> list[str]:
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded: list[str] = json.loads(out.stdout)
    return loaded


@pytest.mark.parametrize(
    "statement",
    [
        "import autocompact",
        "import autocompact.chat, autocompact.compaction, autocompact.testing, autocompact.codec",
    ],
    ids=["package", "core-modules"],
)
def test_import_loads_no_sdk_and_no_cli(statement: str) -> None:
    """Importing the core loads no provider SDK, no terminal library, no HTTP client, no CLI."""
    loaded = _modules_after(statement)
    bad = [m for m in loaded if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
    assert bad == []
    assert not any(m == "autocompact.cli" or m.startswith("autocompact.cli.") for m in loaded)


def test_testing_module_exports_the_fake() -> None:
    """autocompact.testing re-exports the scripted fake provider."""
    import autocompact.testing as testing

    assert {"FakeProvider", "FakeReply", "FakeTokenizer", "estimate_request_tokens"} <= set(
        testing.__all__
    )


# -- the test suite's own network guard (tests/conftest.py) ---------------------------------


def test_guard_blocks_remote_connections() -> None:
    """Connecting to or resolving a non-loopback host fails the test with a clear message."""
    with pytest.raises(AssertionError, match="must not reach the network"):
        socket.create_connection(("example.com", 443), timeout=1)
    with pytest.raises(AssertionError, match="must not reach the network"):
        socket.getaddrinfo("pypi.org", 443)
    sock = socket.socket()
    try:
        with pytest.raises(AssertionError, match=r"'8\.8\.8\.8'"):
            sock.connect(("8.8.8.8", 53))
        with pytest.raises(AssertionError, match="must not reach the network"):
            sock.connect_ex(("1.1.1.1", 53))
    finally:
        sock.close()


def test_guard_allows_loopback() -> None:
    """Servers on 127.0.0.1 / localhost remain reachable."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        for host in ("127.0.0.1", "localhost"):
            client = socket.create_connection((host, port), timeout=5)
            conn, _ = server.accept()
            conn.close()
            client.close()
    finally:
        server.close()
