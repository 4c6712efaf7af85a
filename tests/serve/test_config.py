"""The proxy's options: the lease follows the side query's timeout; bad values (a store it
cannot write among them) are refused with the flag named."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from autocompact.errors import ConfigError
from autocompact.serve import ServeConfig
from autocompact.serve.app import LEASE_MARGIN

UPSTREAMS = {"openai": "http://127.0.0.1:9/v1"}


def _config(**options: object) -> ServeConfig:
    return ServeConfig(upstreams=UPSTREAMS, store="sqlite:///x.db", **options)  # type: ignore[arg-type]


def test_lease_follows_the_side_query_timeout() -> None:
    """Without --lease-seconds a lease lasts one side query's timeout plus the margin."""
    assert _config().lease_length == 300.0 + LEASE_MARGIN
    assert _config(side_query_timeout=60.0).lease_length == 60.0 + LEASE_MARGIN
    assert _config(side_query_timeout=60.0, lease_seconds=5.0).lease_length == 5.0


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        ({"lease_seconds": 0.0}, "--lease-seconds"),
        ({"lease_seconds": math.inf}, "--lease-seconds"),  # a killed worker's lease never ends
        ({"timeout": math.inf}, "--timeout"),
        ({"side_query_timeout": math.inf}, "--side-query-timeout"),
        ({"timeout": math.nan}, "--timeout"),
        ({"side_query_timeout": -1.0}, "--side-query-timeout"),
        ({"keep_share": 1.0}, "--keep-share"),
        ({"summary_target_tokens": 0}, "--summary-target-tokens"),
    ],
)
def test_bad_values_name_the_flag(options: dict[str, object], flag: str) -> None:
    """An out-of-range option is a ConfigError naming its flag and the value."""
    with pytest.raises(ConfigError, match=flag):
        _config(**options)


def test_the_planner_gets_the_compaction_settings(tmp_path: Path) -> None:
    """--summary-target-tokens, --keep-share and the lease length reach the planner."""
    from autocompact.serve import ServeApp

    config = ServeConfig(
        upstreams=UPSTREAMS,
        store=f"sqlite:///{tmp_path / 's.db'}",
        summary_target_tokens=48,
        keep_share=0.7,
        side_query_timeout=10.0,
    )
    app = ServeApp(config)
    try:
        assert app.planner.summary_target_tokens == 48
        assert app.planner.keep_share == 0.7
        assert app.planner.lease_seconds == 10.0 + LEASE_MARGIN
    finally:
        app.store.close()


@pytest.mark.parametrize(
    ("store", "said"),
    [
        ("sqlite:///{tmp}/a-file/serve.db", "Not a directory"),
        ("sqlite:///{tmp}/ro.db?mode=ro", "without ?mode=ro"),
        ("{tmp}/a-file/sessions", "Not a directory"),
    ],
    ids=["sqlite-under-a-file", "sqlite-read-only", "jsonl-under-a-file"],
)
def test_a_store_that_cannot_be_written_stops_the_start(
    tmp_path: Path,
    started: list[int],
    capsys: pytest.CaptureFixture[str],
    store: str,
    said: str,
) -> None:
    """``autocompact serve`` with a store it cannot write exits with an error naming the
    option, the store and why, before it serves: it started, answered every request
    uncompacted and said so only in the log, one request at a time."""
    from autocompact.cli.main import main

    (tmp_path / "a-file").write_text("")
    from autocompact.sessions.stores import open_store

    made = open_store(f"sqlite:///{tmp_path}/ro.db")  # (made here, then opened read-only)
    made.exists("x")
    made.close()
    address = store.format(tmp=tmp_path)
    code = main(["serve", "--upstream", "openai=http://127.0.0.1:9/v1", "--store", address])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"Error: the store {address} ")
    assert said in err
    assert "--store" in err
    assert started == []


def test_a_plain_store_path_ending_in_db_is_a_sqlite_file_and_the_banner_says_so(
    tmp_path: Path, started: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    """``serve --store PATH.db`` serves on the SQLite file PATH.db (it made a JSONL directory
    named PATH.db), and the start line says which store the proxy uses; a directory named so
    is refused naming the jsonl:// address that keeps it."""
    from autocompact.cli.main import main

    path = tmp_path / "proxy.db"
    argv = ["serve", "--upstream", "openai=http://127.0.0.1:9/v1", "--store"]
    assert main([*argv, str(path)]) == 0
    assert started == [1]
    assert path.read_bytes()[:16] == b"SQLite format 3\x00"
    assert f"\n  store: SQLite file {path} (--store)\n" in capsys.readouterr().err
    (tmp_path / "old.db").mkdir()
    assert main([*argv, str(tmp_path / "old.db")]) == 2
    err = capsys.readouterr().err
    assert f"give jsonl://{tmp_path / 'old.db'} to keep using it" in err
    assert "autocompact serve on" not in err
    assert started == [1]


@pytest.mark.parametrize("given", ["env", "default"])
def test_the_banner_names_the_store_in_use_and_where_it_came_from(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    started: list[int],
    capsys: pytest.CaptureFixture[str],
    given: str,
) -> None:
    """Without --store, the start line names the store $AUTOCOMPACT_STORE gave, or the
    default serve.db in the user data directory, as the proxy opened it."""
    from autocompact.cli.main import main

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("AUTOCOMPACT_STORE", raising=False)
    if given == "env":
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("AUTOCOMPACT_STORE", "sqlite:env.db")
        expected = f"SQLite file {tmp_path / 'env.db'} ($AUTOCOMPACT_STORE)"
    else:
        path = tmp_path / "data" / "autocompact" / "serve.db"
        expected = f"SQLite file {path} (the default)"
    assert main(["serve", "--upstream", "openai=http://127.0.0.1:9/v1"]) == 0
    assert f"\n  store: {expected}\n" in capsys.readouterr().err


def test_a_postgresql_store_not_answering_yet_is_warned_about(
    started: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    """A PostgreSQL store that does not answer at start is warned about (it may be starting)
    and the proxy serves; the warning never shows the password."""
    from autocompact.cli.main import main

    pytest.importorskip("psycopg")
    address = "postgresql://user:secret@127.0.0.1:9/db?connect_timeout=2"
    code = main(["serve", "--upstream", "openai=http://127.0.0.1:9/v1", "--store", address])
    err = capsys.readouterr().err
    assert code == 0
    assert started
    assert "Warning: the store postgresql://user:***@127.0.0.1:9/db" in err
    assert "secret" not in err


@pytest.mark.parametrize(
    ("upstream", "host", "refused"),
    [
        ("openai=http://127.0.0.1:8787/v1", "127.0.0.1", True),
        ("anthropic=http://localhost:8787", "0.0.0.0", True),
        ("openai=http://127.0.0.1:8080/v1", "127.0.0.1", False),
        ("openai=http://10.0.0.5:8787/v1", "127.0.0.1", False),
    ],
    ids=["same-address", "localhost-on-any", "another-port", "another-host"],
)
def test_an_upstream_that_is_the_proxy_itself_is_refused(
    tmp_path: Path,
    started: list[int],
    capsys: pytest.CaptureFixture[str],
    upstream: str,
    host: str,
    refused: bool,
) -> None:
    """``--upstream`` naming the proxy's own address and port is refused at start, naming the
    upstream and the options: every request went back to the proxy, each waiting on the next
    until --timeout (600 s) ended them with a 504."""
    from autocompact.cli.main import main

    argv = ["serve", "--upstream", upstream, "--host", host, "--port", "8787"]
    code = main([*argv, "--store", f"sqlite:///{tmp_path / 's.db'}"])
    err = capsys.readouterr().err
    if refused:
        assert code == 2
        assert not started
        assert "is this proxy itself" in err
        assert upstream.split("=", 1)[1] in err
    else:
        assert code == 0
        assert started


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://127.0.0.1:8080/v1/chat/completions", "http://127.0.0.1:8080/v1"),
        ("https://api.anthropic.com/v1/messages/", "https://api.anthropic.com/v1"),
        ("http://127.0.0.1:8080/v1/responses", "http://127.0.0.1:8080/v1"),
    ],
)
def test_an_upstream_that_names_an_endpoint_is_refused(url: str, base: str) -> None:
    """An upstream URL that ends with an endpoint the client's path adds (a copied request
    URL) is refused, naming the base URL to give: every request went to
    .../chat/completions/chat/completions and got the server's bare 404."""
    with pytest.raises(ConfigError, match="names an endpoint") as caught:
        ServeConfig(upstreams={"openai": url}, store="sqlite:///x.db")
    assert repr(base) in str(caught.value)
