"""The chat REPL driven through piped input on the fake provider."""

from __future__ import annotations

import json
import re
import stat

import pytest

from autocompact.sessions import SessionStore

from .conftest import ChatEnv


def words(tokens: int) -> str:
    """Text the estimate counts as about ``tokens`` tokens (4 characters a token)."""
    return ("lorem " * (tokens * 4 // 6)).strip()


FAKE_128K = ["chat", "--provider", "fake", "--window", "128k"]


def test_ladder_shows_tips_and_footer_at_the_right_moments(chat_env: ChatEnv) -> None:
    """Crossing warn, auto and hard shows each tip once, the indicator only in the warn band."""
    chat_env.script(
        [
            {"text": "one", "purpose": "chat"},
            {"text": "two", "purpose": "chat"},
            {"text": words(16_000), "purpose": "chat"},
            {"error": "provider", "purpose": "side_query"},
            {"text": words(12_000), "purpose": "chat"},
            {"text": "five", "purpose": "chat"},
        ]
    )
    result = chat_env.run(FAKE_128K, [words(40_000), words(40_000), "q3", "q4", "q5"])
    assert result.code == 0, result.err
    greeting, t1, t2, t3, t4, t5 = result.blocks()
    assert "window 128K (configured)" in greeting
    # safe: no tip, no indicator
    assert "Tip:" not in t1
    assert "approaching" not in t1
    # warn ≤ t < auto: the compress-intro tip and the footer indicator
    assert "Tip: Context is filling up" in t2
    assert re.search(r"\[80K / 128K tokens \(\d+%\) · approaching auto-compaction \(at 95K\)\]", t2)
    # auto ≤ t < hard (the reply pushed it over): context-high, no indicator
    assert "Tip: Context is high" in t3
    assert "approaching" not in t3
    # the auto compaction fails (scripted), the reply pushes past hard: context-critical
    assert "Compacting the conversation (auto," in t4
    assert "Compaction failed (auto): the summary request failed" in t4
    assert "Tip: Context is critical" in t4
    # at hard: the rescue compacts before the send
    assert "Compacting the conversation (hard," in t5
    assert re.search(r"Compressed 1\d\dK → \d+(\.\d)?K tokens \(hard;", t5)
    assert "Tip:" not in t5
    assert "five" in t5
    assert "approaching" not in t5


def test_compress_with_instructions_and_clear_through_the_repl(chat_env: ChatEnv) -> None:
    """/compress reports its outcome, /clear empties the history, both are saved."""
    result = chat_env.run(
        ["chat", "--provider", "fake"],
        [words(300), words(300), words(300), "/compress keep PINEAPPLE", "/context", "/clear"],
    )
    assert result.code == 0, result.err
    assert "Compressed" in result.out
    assert "(manual;" in result.out
    assert "Conversation cleared." in result.out
    (summary,) = SessionStore(chat_env.sessions).list()
    saved = SessionStore(chat_env.sessions).open(summary.header.id)
    assert saved.history == ()
    assert [c["trigger"] for c in saved.compactions] == ["manual"]


def test_ctrl_c_mid_stream_keeps_the_history(chat_env: ChatEnv) -> None:
    """A KeyboardInterrupt raised mid-stream cancels that turn only; the rest is kept and saved."""
    chat_env.script(
        [
            {"text": "first answer", "purpose": "chat"},
            {"text": "partial answer that never ends", "purpose": "chat", "interrupt": True},
            {"text": "third answer", "purpose": "chat"},
        ]
    )
    result = chat_env.run(["chat", "--provider", "fake"], ["q1", "q2", "q3"])
    assert result.code == 0, result.err
    assert "Cancelled; the conversation is as it was." in result.out
    (summary,) = SessionStore(chat_env.sessions).list()
    history = SessionStore(chat_env.sessions).open(summary.header.id).history
    assert [m.text for m in history] == ["q1", "first answer", "q3", "third answer"]


def _saved_long_session(chat_env: ChatEnv, **state: int) -> tuple[SessionStore, str]:
    """A saved 32K session of 10 turns (about 30K tokens: past auto/hard, inside the window),
    its ``state`` record written with ``state``; returns the store and the session's id."""
    from autocompact.content import Message

    store = SessionStore(chat_env.sessions)
    with store.create(
        provider="fake",
        model="fake-model",
        context_window=32_000,
        window_source="configured",
        cwd=chat_env.cwd,
    ) as w:
        for i in range(10):
            w.append_messages([Message.user(f"q{i} {words(3_000)}"), Message.model(f"a{i}")])
        w.record_state(**state)
    return store, w.id


def test_continue_of_a_long_session_compacts_on_the_first_send(chat_env: ChatEnv) -> None:
    """A restored history past the threshold compacts before it is sent, whatever was saved."""
    # A stale, tiny count: trusting it would skip every threshold.
    store, sid = _saved_long_session(chat_env, last_prompt_token_count=500, consecutive_failures=0)
    # About 30K tokens: past auto/hard (22.4K) yet inside the fake's 32K window, so only the
    # pre-send cold estimate can trigger this compaction (not the provider's rejection).
    result = chat_env.run(["chat", "--continue", "--provider", "fake"], ["next question"])
    assert result.code == 0, result.err
    assert "window 32K (configured)" in result.out, result.out
    assert "Compacting the conversation (hard," in result.out  # 32K: hard collapses onto auto
    assert "Compressed" in result.out
    assert "reactive" not in result.out
    saved = store.open(sid)
    assert saved.compactions[-1]["trigger"] == "hard"
    assert len(saved.history) < 20
    assert saved.history[-2].text == "next question"


@pytest.mark.parametrize(("window", "held"), [([], True), (["--window", "33k"], False)])
def test_continue_keeps_the_hold_on_the_same_window(
    chat_env: ChatEnv, window: list[str], held: bool
) -> None:
    """A session saved during a hold (SPEC §10.2) resumes held: the restored history past
    *hard* makes no side query, the guarantee trims the request instead, and the hold is saved
    again. On another window the saved hold means nothing: it is dropped and the restore
    compacts (as test_continue_of_a_long_session_compacts_on_the_first_send shows without one)."""
    store, sid = _saved_long_session(
        chat_env, last_prompt_token_count=500, consecutive_failures=1, hold_until=60_000
    )
    result = chat_env.run(["chat", "--continue", "--provider", "fake", *window], ["next"])
    assert result.code == 0, result.err
    assert ("Compacting the conversation" in result.out) is not held, result.out
    saved = store.open(sid)
    assert (saved.hold_until == 60_000) is held
    assert saved.history[-2].text == "next"


def test_continue_without_a_session_says_so(chat_env: ChatEnv) -> None:
    """--continue in a directory with no saved session is a clear usage error."""
    result = chat_env.run(["chat", "--continue", "--provider", "fake"])
    assert result.code == 2
    assert "no saved session for" in result.err


def test_resume_of_a_torn_file_keeps_turns_and_backs_up(chat_env: ChatEnv) -> None:
    """--resume of a file with a torn last line warns, keeps complete turns, keeps a .bak."""
    first = chat_env.run(["chat", "--provider", "fake"], ["q1", "q2"])
    assert first.code == 0
    (path,) = chat_env.sessions.glob("*.jsonl")
    with path.open("ab") as f:
        f.write(b'{"type":"message","message":{"role":"user","par')
    result = chat_env.run(["chat", "--resume", path.stem], ["q3"])
    assert result.code == 0, result.err
    assert "Warning: line" in result.out
    assert "incomplete" in result.out
    assert path.with_name(path.name + ".bak").exists()
    history = SessionStore(chat_env.sessions).open(path.stem).history
    assert [m.text for m in history] == ["q1", "OK.", "q2", "OK.", "q3", "OK."]


def test_saved_files_are_private(chat_env: ChatEnv) -> None:
    """The sessions directory is 0700 and every session file 0600."""
    assert chat_env.run(["chat", "--provider", "fake"], ["hello"]).code == 0
    assert stat.S_IMODE(chat_env.sessions.stat().st_mode) == 0o700
    files = list(chat_env.sessions.iterdir())
    assert files
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_secret_in_the_environment_is_never_written(chat_env: ChatEnv) -> None:
    """Keys in the environment never reach any file, even when typed into the chat."""
    secrets = {
        "OPENAI_API_KEY": "sk-proj-SECRETSECRET0123456789",
        "ANTHROPIC_API_KEY": "sk-ant-api03-TOPSECRET987654321",
        "MY_SERVICE_TOKEN": "tok_abcdefghijklmnop",
    }
    for name, value in secrets.items():
        chat_env.monkeypatch.setenv(name, value)
    result = chat_env.run(
        ["chat", "--provider", "fake", "--system", f"key {secrets['OPENAI_API_KEY']}"],
        [f"my key is {secrets['OPENAI_API_KEY']} and {secrets['MY_SERVICE_TOKEN']}", "/quit"],
    )
    assert result.code == 0, result.err
    written = [p for p in chat_env.home.rglob("*") if p.is_file()]
    assert written
    for path in written:
        data = path.read_bytes()
        for value in secrets.values():
            assert value.encode() not in data, f"{value} written to {path}"


def test_no_provider_says_what_to_set(chat_env: ChatEnv) -> None:
    """Without a provider the error names the env vars and the local-server flags."""
    result = chat_env.run(["chat"])
    assert result.code == 2
    assert "OPENAI_API_KEY" in result.err
    assert "ANTHROPIC_API_KEY" in result.err
    assert "--provider openai-compatible --base-url http://localhost:11434/v1" in result.err
    assert "--provider fake" in result.err


def test_settings_warning_printed_once_and_settings_used(chat_env: ChatEnv) -> None:
    """A removed setting warns once on stderr; the settings file chooses provider and window."""
    (chat_env.cwd / ".autocompact").mkdir()
    (chat_env.cwd / ".autocompact" / "settings.json").write_text(
        json.dumps(
            {
                "chatCompression": {"contextPercentageThreshold": 0.5},
                "model": {"provider": "fake", "contextWindow": 200_000},
            }
        )
    )
    result = chat_env.run(["chat"], ["/context"])
    assert result.code == 0, result.err
    assert result.err.count("contextPercentageThreshold has been removed") == 1
    assert "Effective window  180K (window − 20K reserve)" in result.out


@pytest.mark.parametrize("command", ["/model", "/sessions", "/help", "/nope"])
def test_other_commands_answer(chat_env: ChatEnv, command: str) -> None:
    """/model, /sessions, /help and unknown commands print their text without a model call."""
    result = chat_env.run(["chat", "--provider", "fake"], ["hi", command])
    assert result.code == 0, result.err
    expected = {
        "/model": "Model: fake-model",
        "/sessions": "* ",  # the current session is marked
        "/help": "/compress [instructions]",
        "/nope": "Unknown command /nope",
    }[command]
    assert expected in result.out


def test_missing_key_names_the_variable(chat_env: ChatEnv) -> None:
    """A provider without its key in the environment names the variable to set."""
    result = chat_env.run(["chat", "--provider", "anthropic"])
    assert result.code == 2
    assert "ANTHROPIC_API_KEY" in result.err


def test_local_server_needs_a_model(chat_env: ChatEnv) -> None:
    """A local OpenAI-compatible server has no default model: the error says to pass --model."""
    result = chat_env.run(
        ["chat", "--provider", "openai-compatible", "--base-url", "http://127.0.0.1:9/v1"]
    )
    assert result.code == 2
    assert "needs --model" in result.err


@pytest.mark.parametrize(("calibration", "compacts"), [(None, False), (2.0, True)])
def test_restore_uses_calibration_only_to_raise(
    chat_env: ChatEnv, calibration: float | None, compacts: bool
) -> None:
    """A saved calibration that says the tokenizer counts double makes a restore compact sooner."""
    from autocompact.content import Message

    store = SessionStore(chat_env.sessions)
    with store.create(
        provider="fake",
        model="fake-model",
        context_window=32_000,
        window_source="configured",
        cwd=chat_env.cwd,
    ) as w:
        for i in range(7):
            w.append_messages([Message.user(f"q{i} {words(2_000)}"), Message.model(f"a{i}")])
        cal = None if calibration is None else {"factor": calibration, "samples": 4}
        w.record_state(last_prompt_token_count=14_000, consecutive_failures=0, calibration=cal)
    result = chat_env.run(["chat", "--continue"], ["next"])
    assert result.code == 0, result.err
    assert ("Compacting the conversation (hard," in result.out) is compacts


def test_model_switch_is_saved_and_resumed(chat_env: ChatEnv) -> None:
    """/model NAME moves the chat to another model; --continue resumes on that model."""
    result = chat_env.run(["chat", "--provider", "fake"], ["hello", "/model fake-2", "again"])
    assert result.code == 0, result.err
    assert "Now using fake/fake-2" in result.out
    (summary,) = SessionStore(chat_env.sessions).list()
    assert summary.header.model == "fake-2"
    assert summary.messages == 4
    again = chat_env.run(["chat", "--continue"], ["/model"])
    assert "Model: fake-2" in again.out


def test_an_automatic_compaction_that_does_nothing_says_why(chat_env: ChatEnv) -> None:
    """A first message past hard starts a rescue with nothing to compact; the chat says so."""
    result = chat_env.run(["chat", "--provider", "fake", "--window", "32k"], [words(23_000)])
    assert result.code == 0, result.err
    block = result.blocks()[1]
    assert "Compacting the conversation (hard, 23K tokens)…" in block
    assert block.count("Nothing to compress: the history is empty") == 1
    assert "OK." in block


def test_breaker_opens_and_recovers_on_screen(chat_env: ChatEnv) -> None:
    """Three failed automatic compactions pause them (shown, footer too); /compress resumes."""
    chat_env.script(
        [{"text": f"a{i}", "purpose": "chat", "prompt_tokens": 96_000} for i in range(5)]
        + [{"error": "provider", "purpose": "side_query"} for _ in range(3)]
    )
    questions = [f"q{i} {words(3_000)}" for i in range(5)]
    result = chat_env.run(FAKE_128K, [*questions, "/compress"])
    assert result.code == 0, result.err
    blocks = result.blocks()
    assert blocks[4].count("Compaction failed (auto)") == 1
    assert "Automatic compaction paused after 3 failures in a row" in blocks[4]
    assert "auto-compaction paused (/compress to retry)]" in blocks[4]
    paused_tip = "Automatic compaction is paused after repeated failures: run /compress."
    assert paused_tip in blocks[4]  # the breaker opening changes the advice: shown at once
    assert "Compacting" not in blocks[5]  # the breaker is open: no automatic attempt
    assert "Tip:" not in blocks[5]  # and the same tip is not repeated on the next turn
    assert "Compressed" in blocks[6]
    assert "Automatic compaction resumed." in blocks[6]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "cannot read AUTOCOMPACT_FAKE_SCRIPT"),
        ('{"replies": 3}', "expected a list of replies"),
        ('[{"error": "boom"}]', "unknown error 'boom'"),
        ('[{"finish_reason": "sideways"}]', "unknown finish_reason 'sideways'"),
        ("[7]", "reply 0 must be a string or an object"),
        # Found by a fuzzer (2026-12-06): each was "unexpected ValueError" (or TypeError,
        # OverflowError, KeyError).
        ('["a", {"prompt_tokens": "abc"}]', "reply 1: prompt_tokens and output_tokens must be"),
        ('[{"output_tokens": [1]}]', "reply 0: prompt_tokens and output_tokens must be"),
        ('[{"prompt_tokens": NaN}]', "reply 0: prompt_tokens and output_tokens must be"),
        ('[{"prompt_tokens": 1e400}]', "reply 0: prompt_tokens and output_tokens must be"),
        ('[{"prompt_tokens": -5}]', "reply 0: prompt_tokens and output_tokens must be"),
        # A fraction, a quoted number and a flag were read as 1, 12 and 1 by int().
        ('[{"prompt_tokens": 1.5}]', "reply 0: prompt_tokens and output_tokens must be"),
        ('[{"output_tokens": "12"}]', "reply 0: prompt_tokens and output_tokens must be"),
        ('[{"prompt_tokens": true}]', "reply 0: prompt_tokens and output_tokens must be"),
        ('[{"text": "a", "purpose": "zz"}]', "reply 0: unknown purpose 'zz'"),
    ],
)
def test_bad_fake_script_is_a_usage_error(chat_env: ChatEnv, content: str, message: str) -> None:
    """A malformed AUTOCOMPACT_FAKE_SCRIPT names the file and what is wrong."""
    path = chat_env.cwd / "bad.json"
    path.write_text(content)
    chat_env.monkeypatch.setenv("AUTOCOMPACT_FAKE_SCRIPT", str(path))
    result = chat_env.run(["chat", "--provider", "fake"], ["hi"])
    assert result.code == 2
    assert message in result.err
    assert "bad.json" in result.err


def test_after_a_failed_rescue_the_next_sends_are_held_and_the_tip_says_so(
    chat_env: ChatEnv,
) -> None:
    """On a small window a failed hard rescue starts a hold: the next sends run no side query
    (the oldest turns are left out instead), and the critical tip says automatic compaction is
    paused, not that a forced compaction ran. Seen on a real 8K llama-server: the hold began
    below the count (the message being sent was left out of it), so a failed summary was
    generated for minutes before every turn, and the tip said a rescue ran when none did."""
    chat_env.script(
        [{"text": "ok", "purpose": "chat"} for _ in range(5)]
        + [{"error": "provider", "purpose": "side_query"}]
        + [{"text": "ok", "purpose": "chat"} for _ in range(2)]
    )
    questions = [f"q{i} {words(1_300)}" for i in range(5)]
    result = chat_env.run(["chat", "--provider", "fake", "--window", "8k"], [*questions, "q", "r"])
    assert result.code == 0, result.err
    blocks = result.blocks()
    assert "Compacting the conversation (hard, 6.5K tokens)" in blocks[5]
    assert "Compaction failed (hard)" in blocks[5]
    assert "Tip: Context is critical" in blocks[5]
    assert "Automatic compaction is paused" in blocks[5]
    assert "already ran" not in blocks[5]
    for block in blocks[6:8]:  # held: no side query, the request is trimmed instead
        assert "Compacting" not in block
        assert "out of this request" in block
        assert "Tip:" not in block  # the same tip is not repeated


def test_a_failed_turn_says_the_message_was_not_kept(chat_env: ChatEnv) -> None:
    """A send the provider refuses (a real 8K llama-server's "exceeds the available context
    size" after a failed reactive compaction, a server that is down) shows the error and says
    the message is not in the conversation, which it is not: the user knows to send it again.
    It showed only the provider's error."""
    chat_env.script(
        [
            {"text": "one", "purpose": "chat"},
            {"error": "provider", "purpose": "chat"},
            {"text": "three", "purpose": "chat"},
        ]
    )
    result = chat_env.run(["chat", "--provider", "fake"], ["first", "second", "third"])
    assert result.code == 0, result.err
    _, first, second, third = result.blocks()
    assert "not added" not in first
    assert "Error:" in second
    assert "Your message was not added to the conversation" in second
    assert "three" in third
    (summary,) = SessionStore(chat_env.sessions).list()
    saved = SessionStore(chat_env.sessions).open(summary.header.id)
    assert [m.text for m in saved.history] == ["first", "one", "third", "three"]


def test_a_failed_turn_after_a_compaction_says_the_compaction_is_kept(chat_env: ChatEnv) -> None:
    """The send that failed had been preceded by a compaction, which stays (its history is the
    conversation now): the chat says so rather than "the history is as it was before it"."""
    chat_env.script(
        [
            {"text": "ok1", "purpose": "chat"},
            {"text": "ok2", "purpose": "chat"},
            {"error": "provider", "purpose": "chat"},
        ]
    )
    big = [words(6_700), words(6_700), words(9_000)]
    result = chat_env.run(["chat", "--provider", "fake", "--window", "32k"], big)
    assert result.code == 0, result.err
    failed = result.blocks()[3]
    assert "Compressed" in failed
    assert "Error:" in failed
    assert "Your message was not added to the conversation" in failed
    assert "the compaction made before sending it is kept" in failed
    assert "as it was" not in failed
    (summary,) = SessionStore(chat_env.sessions).list()
    saved = SessionStore(chat_env.sessions).open(summary.header.id)
    assert len(saved.history) < 4  # the compacted history, without the message that failed
    assert big[2] not in [m.text for m in saved.history]


@pytest.mark.parametrize("rescue", [False, True], ids=["reply-crossed-hard", "after-a-rescue"])
def test_critical_tip_says_a_rescue_ran_only_when_one_did(chat_env: ChatEnv, rescue: bool) -> None:
    """The critical tip says a forced compaction already ran before the send only when one did;
    when the reply pushed the count past hard (the send was below auto: nothing ran), it says
    one runs before the next send, and the next send runs it."""
    third = words(30_000) if rescue else "q3"
    chat_env.script(
        [{"text": "one", "purpose": "chat"}, {"text": "two", "purpose": "chat"}]
        + ([{"error": "provider", "purpose": "side_query"}] if rescue else [])
        + [{"text": words(16_000 if rescue else 30_000), "purpose": "chat"}]
        + [{"text": "four", "purpose": "chat"}]
    )
    result = chat_env.run(FAKE_128K, [words(40_000), words(40_000), third, "q4"])
    assert result.code == 0, result.err
    t3, t4 = result.blocks()[3:5]
    assert "Tip: Context is critical" in t3
    if rescue:  # the rescue failed; the reply outgrew its hold: another runs next time
        assert "Compaction failed (hard)" in t3
        assert "A forced compaction already ran before this send, and another runs" in t3
    else:
        assert "Compacting" not in t3
        assert "already ran" not in t3
        assert "A forced compaction runs before the next send" in t3
    assert "Compacting the conversation (hard," in t4


def test_fake_without_a_window_says_the_window_is_assumed(chat_env: ChatEnv) -> None:
    """--provider fake without --window says at start that it assumes 128,000 tokens and how
    to set another (it said so only in /context); with --window it says nothing of it."""
    result = chat_env.run(["chat", "--provider", "fake"], ["hi"])
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert "window 128K (assumed)" in lines[0]
    assert lines[1] == (
        "Warning: no window given: assuming 128,000 tokens for the fake provider; pass "
        "--window N (e.g. --window 32k) to try the ladder on another size"
    )
    configured = chat_env.run(["chat", "--provider", "fake", "--window", "32k"], ["hi"])
    assert "assuming" not in configured.out
