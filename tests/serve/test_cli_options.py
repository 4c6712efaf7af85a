"""``autocompact serve``'s options refused with a message that is true (found probing the
proxy, 2026-12-07): an upstream named twice, a window no request fits in, a store address from
$AUTOCOMPACT_STORE, a store the proxy cannot write."""

from __future__ import annotations

from pathlib import Path

import pytest

from autocompact.cli.main import main

OPENAI = "openai=http://127.0.0.1:9/v1"


def test_an_upstream_named_twice_with_two_urls_is_refused(
    tmp_path: Path, started: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--upstream openai=A --upstream openai=B``: a usage error naming both (B was used,
    silently); the same URL twice is one upstream."""
    store = ["--store", f"sqlite:///{tmp_path / 's.db'}"]
    code = main(["serve", "--upstream", "openai=http://a:1/v1", "--upstream",
                 "openai=http://b:2/v1", *store])  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err == (
        "Error: --upstream openai= is given twice, http://a:1/v1 and http://b:2/v1: give each "
        "upstream once\n"
    )
    assert started == []
    assert main(["serve", "--upstream", OPENAI, "--upstream", OPENAI, *store]) == 0
    assert started == [1]


@pytest.mark.parametrize(("window", "accepted"), [("100", False), ("999", False), ("1k", True)])
def test_a_context_window_below_the_smallest_is_refused_as_chat_refuses_it(
    tmp_path: Path,
    started: list[int],
    capsys: pytest.CaptureFixture[str],
    window: str,
    accepted: bool,
) -> None:
    """``--context-window`` under 1,000 tokens (``SMALLEST_WINDOW``, what ``chat --window``
    and the settings files accept) is a usage error saying so (100 started the proxy, and no
    real request fitted)."""
    argv = ["serve", "--upstream", OPENAI, "--store", f"sqlite:///{tmp_path / 's.db'}"]
    if accepted:
        assert main([*argv, "--context-window", window]) == 0
        assert started == [1]
        return
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--context-window", window])
    assert exited.value.code == 2
    assert (
        f"argument --context-window: --context-window must be at least 1,000 tokens, got "
        f"{window}: give the model's context window, e.g. 128k\n"
    ) in capsys.readouterr().err
    assert started == []


@pytest.mark.parametrize("given", ["env", "flag"])
def test_an_unknown_store_address_names_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch,
    started: list[int],
    capsys: pytest.CaptureFixture[str],
    given: str,
) -> None:
    """An address of no known kind says whether it is $AUTOCOMPACT_STORE's or --store's (from
    the environment, nothing on the command line said where it came from)."""
    argv = ["serve", "--upstream", OPENAI]
    if given == "env":
        monkeypatch.setenv("AUTOCOMPACT_STORE", "bogus://x")
        where = "$AUTOCOMPACT_STORE"
    else:
        monkeypatch.delenv("AUTOCOMPACT_STORE", raising=False)
        argv += ["--store", "bogus://x"]
        where = "--store"
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"Error: {where}: unknown store 'bogus://x': use sqlite:///path, "
        "postgresql://user@host/db, or a directory of JSONL session files\n"
    )
    assert started == []


def test_a_store_the_proxy_cannot_open_is_not_told_to_open_it_read_only(
    tmp_path: Path, started: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    """A SQLite file that cannot be opened: the error no longer suggests adding ?mode=ro to
    only read it, which the proxy refuses (it writes its compactions there)."""
    (tmp_path / "a-file").write_text("")
    address = f"sqlite:///{tmp_path}/a-file/serve.db"
    assert main(["serve", "--upstream", OPENAI, "--store", address]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"Error: the store {address} cannot be used: cannot create the SQLite ")
    assert "a-file is not a folder" in err
    assert err.endswith("give --store a SQLite file (or a directory) the proxy can write\n")
    assert "mode=ro" not in err
    assert started == []
