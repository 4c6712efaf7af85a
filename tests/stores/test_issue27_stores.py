"""Issue 27, the store parts: one redaction policy, PostgreSQL passwords, JSONL id length."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from autocompact.content import Message
from autocompact.errors import SessionStoreError
from autocompact.sessions.stores import open_store
from autocompact.sessions.stores.base import SessionStore

from .conftest import make_store

META = {"provider": "fake", "model": "m", "context_window": 10_000, "system_instruction": "s"}
GIVEN = "hunter2-given-secret"  # a secret the caller names (an API key from the environment)
SHAPED = "sk-proj-" + "A1b2C3d4E5" * 3  # a credential shape nobody named


def _stored_text(kind: str, store: SessionStore, tmp_path: Path) -> str:
    """Everything the store keeps, as text: its files' bytes, or every row of its tables."""
    if kind == "postgres":
        raw: Any = store
        with raw._transaction(write=False) as cur:
            rows = []
            for table in ("ac_sessions", "ac_entries", "ac_attempts"):
                cur.execute(f"SELECT * FROM {table}")
                rows.extend(cur.fetchall())
        return repr(rows)
    return "".join(
        p.read_bytes().decode("utf-8", "replace") for p in tmp_path.rglob("*") if p.is_file()
    )


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "jsonl"])
def test_every_backend_keeps_secrets_out_as_the_jsonl_files_do(kind: str, tmp_path: Path) -> None:
    """A named secret and a credential shape in a turn, a summary and an attempt: stored nowhere."""
    store = make_store(kind, tmp_path, redact=[GIVEN])
    store.ensure("s", META)
    typed = Message.user(f"my keys: {GIVEN} and {SHAPED}")
    store.append_turn("s", "t1", (typed, Message.model(f"noted {SHAPED}")))
    base = store.load("s")
    summary = (Message.user(f"summary: the user gave {GIVEN}"),)
    info = {"status": "compressed", "trigger": "manual", "summary": f"key {SHAPED}"}
    assert store.commit_compaction(base, summary, info).committed
    store.record_attempt("s", {"status": "noop", "error": GIVEN}, counted=False, epoch=1)
    store.close()
    text = _stored_text(kind, store, tmp_path)
    assert "[redacted]" in text
    assert GIVEN not in text
    assert SHAPED not in text


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_without_named_secrets_credential_shapes_are_still_redacted(
    kind: str, tmp_path: Path
) -> None:
    """No redact= given: the well-known shapes are kept out by every backend alike."""
    store = make_store(kind, tmp_path)
    store.ensure("s", META)
    store.append_turn("s", "t1", (Message.user(f"use {SHAPED}"), Message.model("ok")))
    assert "[redacted]" in store.load("s").history[0].text
    store.close()
    assert SHAPED not in _stored_text(kind, store, tmp_path)


def test_a_long_id_on_the_jsonl_store_is_a_clear_error_not_an_oserror(tmp_path: Path) -> None:
    """256 characters (the store-wide limit) overflow a file name: the error says what to do."""
    store = open_store(str(tmp_path / "jsonl"))
    for call in (
        lambda: store.ensure("a" * 256, META),
        lambda: store.load("a" * 256),
        lambda: store.exists("é" * 200),
    ):
        with pytest.raises(SessionStoreError, match="at most 239") as err:
            call()
        assert "a SQL store" in str(err.value)
    store.ensure("a" * 239, META)  # the longest that fits works, with its lease file
    assert store.acquire_lease("a" * 239, "me") is not None


PASSWORD = "p@ss/w#rd?xSECRET"


def test_a_password_with_unencoded_url_characters_is_never_shown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``@ / # ?`` unencoded in the password: the address and the error hide all of it."""
    import socket

    from autocompact.sessions.stores.postgres import PostgresStore

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dsn = f"postgresql://u:{PASSWORD}@127.0.0.1:{port}/db"
    store = open_store(dsn, connect_timeout=1)
    assert isinstance(store, PostgresStore)
    assert store.address == f"postgresql://u:***@127.0.0.1:{port}/db"
    with pytest.raises(SessionStoreError) as err:
        store.list_sessions()
    shown = str(err.value) + repr(err.value) + caplog.text
    for piece in ("xSECRET", "w#rd", "p@ss"):
        assert piece not in shown
    assert list(tmp_path.iterdir()) == []


def test_a_libpq_keyword_string_is_a_postgres_address_not_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``host=… password=…``: PostgreSQL, the password hidden, no folder created."""
    import socket

    from autocompact.sessions.stores import open_async_store
    from autocompact.sessions.stores.postgres import AsyncPostgresStore, PostgresStore

    monkeypatch.chdir(tmp_path)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dsn = f"host=127.0.0.1 port={port} user=u password=KwSECRET99 dbname=d connect_timeout=1"
    store = open_store(dsn, connect_timeout=1)
    assert isinstance(store, PostgresStore)
    assert isinstance(open_async_store(dsn), AsyncPostgresStore)
    assert "KwSECRET99" not in store.address
    assert "password=***" in store.address
    assert "KwSECRET99" not in PostgresStore(dsn).address
    with pytest.raises(SessionStoreError) as err:
        store.list_sessions()
    assert "KwSECRET99" not in str(err.value) + caplog.text
    assert list(tmp_path.iterdir()) == []  # no folder named after the password
