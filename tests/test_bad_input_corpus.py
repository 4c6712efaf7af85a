"""Issue 16: the bad-input corpus. Every case raises the documented error naming what is wrong.

One table per door — windows, settings files, transcripts, session files, library calls — each
row a bad input, the exact error type expected, and the text the message must contain (the
file, the field or the argument). The CLI's own doors (``--window``, ``--continue``) are in
``tests/cli/test_session_reliability.py`` and below.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from autocompact import (
    ConfigError,
    ContentError,
    FunctionCallPart,
    FunctionResponsePart,
    Message,
    SessionFileError,
    TextPart,
    ThinkingPart,
    ToolSpec,
    TranscriptFormatError,
)
from autocompact.chat import AsyncChatSession, ChatSession
from autocompact.compaction import CompressionService, CompressOptions, find_split_point
from autocompact.compaction.clearing import clear_tool_outputs
from autocompact.compaction.extractive import extractive_summary
from autocompact.engine import EngineConfig
from autocompact.estimation import (
    estimate_content_chars,
    estimate_content_tokens,
    estimate_prompt_tokens,
)
from autocompact.guard import ContextGuard
from autocompact.sessions import SessionStore, load_session
from autocompact.settings import load_settings
from autocompact.testing import FakeProvider
from autocompact.transcripts import detect_format, read_transcript

DEEP = "[" * 10_000 + "]" * 10_000
LONG = "9" * 5_000  # an integer past Python's 4,300-digit limit on int(str)


def _circular() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


def _nested(depth: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(depth):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


# -- windows: the ChatSession constructor ---------------------------------------------------------

WINDOWS: list[Any] = [
    0,
    -1,
    "0",
    "0k",
    1e99,
    10**30,
    "9999999999999999999999999",
    "1e99",
    "abc",
    "",
    True,
    None,
    [128_000],
    1.5,
    "nan",
    "inf",
    float("inf"),
    "-5k",
    100_000_001,
    "200m",
]


@pytest.mark.parametrize("window", WINDOWS, ids=repr)
@pytest.mark.parametrize("cls", [ChatSession, AsyncChatSession], ids=lambda c: c.__name__)
def test_bad_window(cls: type, window: Any) -> None:
    """A window that is no model's window: ConfigError naming context_window."""
    with pytest.raises(ConfigError) as info:
        cls(FakeProvider(), context_window=window)
    assert type(info.value) is ConfigError
    assert "context_window" in str(info.value)
    assert info.value.key == "context_window"


SHARES = [1, 1.5, -0.1, float("nan"), float("inf"), "0.3", None, True]
TARGETS = [0, -5, 2.5, "800", True]


@pytest.mark.parametrize("share", SHARES, ids=repr)
def test_bad_keep_share_is_refused_when_the_session_is_made(share: Any) -> None:
    """A keep_share that is no share: ConfigError naming it when the session, guard or engine
    configuration is made (it was accepted, then a raw ValueError or TypeError at the first
    compaction, in the middle of a send)."""
    for make in (
        lambda: ChatSession(FakeProvider(), context_window=100_000, keep_share=share),
        lambda: ContextGuard(
            context_window=100_000, compression=CompressionService(FakeProvider()), keep_share=share
        ),
        lambda: EngineConfig(context_window=100_000, keep_share=share),
        lambda: CompressOptions(context_window=100_000, keep_share=share),
    ):
        with pytest.raises(ConfigError, match="keep_share") as info:
            make()
        assert info.value.key == "keep_share"


@pytest.mark.parametrize("target", TARGETS, ids=repr)
def test_bad_summary_target_is_refused_when_the_session_is_made(target: Any) -> None:
    with pytest.raises(ConfigError, match="summary_target_tokens"):
        ChatSession(FakeProvider(), context_window=100_000, summary_target_tokens=target)
    with pytest.raises(ConfigError, match="summary_target_tokens"):
        ContextGuard(
            context_window=100_000,
            compression=CompressionService(FakeProvider()),
            summary_target_tokens=target,
        )


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: clear_tool_outputs([], protect_tokens="5"), "protect_tokens"),
        (lambda: clear_tool_outputs([], protect_tokens=None), "protect_tokens"),
        (lambda: clear_tool_outputs([], image_token_estimate=-1), "image_token_estimate"),
        (lambda: extractive_summary([], max_tokens="900"), "max_tokens"),
        (lambda: extractive_summary([], max_tokens=None), "max_tokens"),
        (
            lambda: estimate_prompt_tokens([], None, 0, image_token_estimate=float("nan")),
            "image_token_estimate",
        ),
        (lambda: CompressOptions(context_window=0), "context_window"),
        (lambda: CompressOptions(context_window=1000, trigger="auto"), "trigger"),
        (
            lambda: CompressOptions(context_window=1000, last_prompt_token_count=-1),
            "last_prompt_token_count",
        ),
        # instructions that are no str failed the side query with a raw AttributeError ('int'
        # object has no attribute 'strip'), from ChatSession.compress(5) too.
        (lambda: CompressOptions(context_window=1000, instructions=5), "instructions"),
        (lambda: CompressOptions(context_window=1000, system_instruction=5), "system_instruction"),
        (lambda: _session_with(history=_TWO_TURNS).compress(["be brief"]), "instructions"),
    ],
    ids=[
        "clear-protect-str",
        "clear-protect-none",
        "clear-image-negative",
        "extractive-max-str",
        "extractive-max-none",
        "estimate-image-nan",
        "options-window-zero",
        "options-trigger-str",
        "options-count-negative",
        "options-instructions-int",
        "options-system-int",
        "session-compress-instructions-list",
    ],
)
def test_function_api_values_are_config_errors_naming_the_argument(
    call: Callable[[], object], named: str
) -> None:
    """The function API's counts and options: ConfigError naming the argument (they were
    raw TypeErrors, ValueErrors and AttributeErrors from deep inside)."""
    with pytest.raises(ConfigError, match=named) as info:
        call()
    assert info.value.key == named


NOT_MESSAGES: list[tuple[str, Any, str]] = [
    ("a-str", "hello", "must be a sequence of Message objects, got str"),
    ("none", None, "must be a sequence of Message objects, got NoneType"),
    ("a-dict", {"role": "user"}, "must be a sequence of Message objects, got dict"),
    ("ints", [1, 2], "[0] must be a Message"),
    ("a-str-second", [Message.user("a"), "b"], "[1] must be a Message"),
    ("a-dict-last", [Message.user("a"), {"role": "user", "content": "b"}], "[1] must be"),
]
READERS: dict[str, Callable[[Any], object]] = {
    "estimate_content_tokens": estimate_content_tokens,
    "estimate_content_chars": estimate_content_chars,
    "find_split_point": find_split_point,
    "clear_tool_outputs": clear_tool_outputs,
    "extractive_summary": extractive_summary,
    "CompressionService.compress": lambda h: CompressionService(FakeProvider()).compress(
        h, CompressOptions(context_window=1000, force=True)
    ),
    "ContextGuard.run": lambda h: ContextGuard(
        context_window=10_000, compression=CompressionService(FakeProvider())
    ).run(h),
    "ContextGuard.guarantee": lambda h: ContextGuard(
        context_window=10_000, compression=CompressionService(FakeProvider())
    ).guarantee(h),
}


@pytest.mark.parametrize("reader", list(READERS.values()), ids=list(READERS))
@pytest.mark.parametrize(
    ("history", "words"), [c[1:] for c in NOT_MESSAGES], ids=[c[0] for c in NOT_MESSAGES]
)
def test_a_history_of_other_things_is_a_content_error_naming_the_item(
    reader: Callable[[Any], object], history: Any, words: str
) -> None:
    """The function API handed something that is no history: a ContentError that names the
    item (they were raw AttributeErrors and TypeErrors from deep inside)."""
    with pytest.raises(ContentError) as info:
        reader(history)
    assert words in str(info.value)


def test_a_split_fraction_that_is_no_number_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="preserve_fraction"):
        find_split_point([], "0.5")  # type: ignore[arg-type]


# -- settings files ------------------------------------------------------------------------------

SETTINGS: list[tuple[str, str, str]] = [
    ("window-zero", '{"model": {"contextWindow": 0}}', "model.contextWindow"),
    ("window-zero-str", '{"model": {"contextWindow": "0"}}', "model.contextWindow"),
    ("window-1e99", '{"model": {"contextWindow": 1e99}}', "model.contextWindow"),
    ("window-10e30", '{"model": {"contextWindow": 1000000000000000000000000000000}}', "model."),
    ("window-digits", '{"model": {"contextWindow": "9999999999999999999999999"}}', "model."),
    ("window-negative", '{"model": {"contextWindow": -5}}', "model.contextWindow"),
    ("window-word", '{"model": {"contextWindow": "large"}}', "model.contextWindow"),
    ("window-bool", '{"model": {"contextWindow": true}}', "model.contextWindow"),
    ("window-null", '{"model": {"contextWindow": null}}', "model.contextWindow"),
    ("window-list", '{"model": {"contextWindow": [1]}}', "model.contextWindow"),
    # Found by a fuzzer (2026-12-06): accepted, though --window refuses a window below 1,000.
    ("window-tiny", '{"model": {"contextWindow": 50}}', "at least 1,000 tokens"),
    ("window-tiny-str", '{"model": {"contextWindow": "0.9k"}}', "model.contextWindow"),
    ("image-negative", '{"chatCompression": {"imageTokenEstimate": -1}}', "imageTokenEstimate"),
    ("image-string", '{"chatCompression": {"imageTokenEstimate": "x"}}', "imageTokenEstimate"),
    ("image-float", '{"chatCompression": {"imageTokenEstimate": 1.5}}', "imageTokenEstimate"),
    ("image-bool", '{"chatCompression": {"imageTokenEstimate": true}}', "imageTokenEstimate"),
    ("clearing-string", '{"chatCompression": {"toolOutputClearing": "yes"}}', "toolOutputClearing"),
    ("clearing-int", '{"chatCompression": {"toolOutputClearing": 1}}', "toolOutputClearing"),
    ("provider-empty", '{"model": {"provider": ""}}', "model.provider"),
    ("provider-number", '{"model": {"provider": 5}}', "model.provider"),
    ("name-null", '{"model": {"name": null}}', "model.name"),
    # Found by a fuzzer (2026-12-06): blanks were a model named "  " (--model "  " is refused).
    ("name-blank", '{"model": {"name": "  "}}', "model.name must be a non-empty string"),
    ("provider-blank", '{"model": {"provider": "\\t"}}', "model.provider"),
    ("base-url-number", '{"model": {"baseUrl": 3}}', "model.baseUrl"),
    # Found by a fuzzer (2026-12-06): a control character was "unexpected InvalidURL" at the
    # first send; an address without http:// was sent as a relative path.
    ("base-url-control", '{"model": {"baseUrl": "http://h/v1\\u0001"}}', "model.baseUrl"),
    ("base-url-no-scheme", '{"model": {"baseUrl": "localhost:8000"}}', "model.baseUrl"),
    ("section-number", '{"model": 5}', "'model'"),
    ("section-list", '{"chatCompression": []}', "'chatCompression'"),
    ("top-list", "[]", "JSON object"),
    ("top-string", '"x"', "JSON object"),
    ("top-number", "3", "JSON object"),
    ("truncated", '{"model": {', "not valid JSON"),
    ("bad-value", '{"model": }', "not valid JSON"),
    ("deep", '{"model":\n' + DEEP + "}", "nested too deeply"),
    ("not-utf8", "\udcff", "cannot read"),
    # Found by a fuzzer (2026-12-06): json.loads's plain ValueError, unexpected in the CLI.
    ("number-too-long", '{"chatCompression":\n{"imageTokenEstimate": ' + LONG + "}}", ":2:"),
]


@pytest.mark.parametrize(
    ("content", "named"), [c[1:] for c in SETTINGS], ids=[c[0] for c in SETTINGS]
)
def test_bad_settings_file(tmp_path: Path, content: str, named: str) -> None:
    """A bad settings.json: ConfigError naming the file and the key (or the line)."""
    path = tmp_path / "settings.json"
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    with pytest.raises(ConfigError) as info:
        load_settings([path])
    assert type(info.value) is ConfigError
    assert str(path) in str(info.value)
    assert named in str(info.value)
    assert info.value.file == str(path)


def test_settings_file_that_is_a_directory(tmp_path: Path) -> None:
    """settings.json that is a directory: ConfigError naming it, not silently ignored."""
    path = tmp_path / "settings.json"
    path.mkdir()
    with pytest.raises(ConfigError, match="directory") as info:
        load_settings([path])
    assert str(path) in str(info.value)


def test_deep_settings_names_the_line(tmp_path: Path) -> None:
    """10,000 levels of nesting: the error names the line it happens on."""
    path = tmp_path / "settings.json"
    path.write_text('{\n"model":\n' + DEEP + "\n}")
    with pytest.raises(ConfigError, match=r"settings\.json:3:") as info:
        load_settings([path])
    assert "nested too deeply" in str(info.value)


# -- transcripts ---------------------------------------------------------------------------------


def _cc_user(text: str) -> str:
    return json.dumps(
        {"type": "user", "sessionId": "s", "message": {"role": "user", "content": text}}
    )


def _cc_assistant(usage: dict[str, Any]) -> str:
    message = {
        "id": "m1",
        "model": "claude-x",
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "usage": usage,
    }
    return json.dumps({"type": "assistant", "sessionId": "s", "message": message})


def _openai(usage: Any) -> str:
    return json.dumps(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok", "usage": usage}]
    )


def _qwen(usage: dict[str, Any]) -> str:
    user = {
        "type": "user",
        "sessionId": "s",
        "message": {"role": "user", "parts": [{"text": "hi"}]},
    }
    assistant = {
        "type": "assistant",
        "sessionId": "s",
        "message": {"role": "model", "parts": [{"text": "ok"}]},
        "usageMetadata": usage,
        "model": "qwen",
    }
    return json.dumps(user) + "\n" + json.dumps(assistant) + "\n"


TRANSCRIPTS: list[tuple[str, str, str]] = [
    ("empty", "", "empty"),
    ("deep-line", _cc_user("a") + "\n" + _cc_user("b") + '\n{"a":' + DEEP + "}\n", ":3:"),
    ("deep-document", "[\n" + DEEP + "]", ":2:"),
    ("bad-json-line", _cc_user("a") + "\n" + _cc_user("b") + "\n{not json\n", ":3:"),
    ("array-line", _cc_user("a") + "\n" + _cc_user("b") + "\n[1, 2]\n", ":3:"),
    ("usage-string", _cc_user("a") + "\n" + _cc_assistant({"input_tokens": "12"}), "input_tokens"),
    ("usage-negative", _cc_user("a") + "\n" + _cc_assistant({"input_tokens": -4}), "input_tokens"),
    ("usage-fraction", _cc_user("a") + "\n" + _cc_assistant({"output_tokens": 1.5}), "output_"),
    ("usage-bool", _cc_user("a") + "\n" + _cc_assistant({"input_tokens": True}), "input_tokens"),
    ("openai-usage-list", _openai([1]), "'usage'"),
    ("openai-usage-string", _openai({"prompt_tokens": "9"}), "prompt_tokens"),
    ("openai-usage-negative", _openai({"completion_tokens": -1}), "completion_tokens"),
    ("qwen-usage-string", _qwen({"promptTokenCount": "10"}), "promptTokenCount"),
    ("unknown-object", '{"hello": "world"}', "not a transcript"),
    # Found by a fuzzer (2026-12-06): each failed inside the reader or the replay.
    ("usage-huge", _cc_user("a") + "\n" + _cc_assistant({"input_tokens": 10**40}), "2**53"),
    ("openai-usage-huge", _openai({"prompt_tokens": 10**40}), "prompt_tokens"),
    ("type-a-list", '{"type": []}\n', "not a transcript"),
    ("type-an-object", '{"type": "x"}\n{"type": {}}\n', "not a transcript"),
    ("role-a-list", '[{"role": []}]', "not a transcript"),
    ("number-too-long-line", _cc_user("a") + '\n{"type": "user", "n": ' + LONG + "}\n", ":2:"),
    ("number-too-long-document", '[\n{"role": "user", "n": -' + LONG + "}]", ":2:"),
]


@pytest.mark.parametrize(
    ("content", "named"), [c[1:] for c in TRANSCRIPTS], ids=[c[0] for c in TRANSCRIPTS]
)
def test_bad_transcript(tmp_path: Path, content: str, named: str) -> None:
    """A bad transcript: TranscriptFormatError naming the file and the line or field."""
    path = tmp_path / "t.jsonl"
    path.write_text(content)
    with pytest.raises(TranscriptFormatError) as info:
        read_transcript(path)
    assert str(path) in str(info.value)
    assert named in str(info.value)


def test_a_damaged_gzip_file_is_named(tmp_path: Path) -> None:
    """A gzip header followed by damage: TranscriptFormatError naming the file (it was a raw
    ``zlib.error``)."""
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + b"\xff" * 20)
    with pytest.raises(TranscriptFormatError) as info:
        read_transcript(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    "content",
    [
        '{"messages":[{"type":"gemini","content":"hi","tokens":{"input":NaN}}]}',
        '{"messages":[{"type":"gemini","content":"hi","tokens":{"input":Infinity}}]}',
        _cc_user("a") + '\n{"type":"system","subtype":"compact_boundary",'
        '"compactMetadata":{"trigger":"auto","preTokens":NaN}}\n' + _cc_user("b") + "\n",
    ],
    ids=["gemini-nan", "gemini-infinity", "claude-code-pre-tokens-nan"],
)
def test_a_count_that_is_not_finite_reads_as_none(tmp_path: Path, content: str) -> None:
    """A count recorded as ``NaN`` or ``Infinity`` where a missing count reads as 0 (it was a
    raw ``ValueError`` or ``OverflowError``)."""
    path = tmp_path / "t.json"
    path.write_text(content)
    transcript = read_transcript(path)
    assert all(call.prompt_tokens == 0 for call in transcript.calls)
    assert all(marker.pre_tokens in (0, None) for marker in transcript.compactions)


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize(
    "content",
    [
        _cc_user("a") + "\n" + _cc_assistant({"input_tokens": 12}) + "\n",
        _openai({"prompt_tokens": 9}),
    ],
    ids=["claude-code", "openai-json"],
)
def test_a_byte_order_mark_is_no_content(tmp_path: Path, content: str, gzipped: bool) -> None:
    """A file that starts with UTF-8's byte order mark (as some editors write) reads as the
    same file without it (it was "not valid JSON ... decode using utf-8-sig")."""
    import gzip

    data = content.encode()
    plain, marked = tmp_path / "plain.jsonl", tmp_path / "marked.jsonl"
    plain.write_bytes(gzip.compress(data) if gzipped else data)
    marked.write_bytes(gzip.compress(b"\xef\xbb\xbf" + data) if gzipped else b"\xef\xbb\xbf" + data)
    want, got = read_transcript(plain), read_transcript(marked)
    assert (got.format, got.messages, got.calls) == (want.format, want.messages, want.calls)


def test_transcript_not_utf8(tmp_path: Path) -> None:
    """Binary content: TranscriptFormatError naming the file and line."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(_cc_user("a").encode() + b"\n\xff\xfe\n")
    with pytest.raises(TranscriptFormatError) as info:
        read_transcript(path, format="claude-code")
    assert f"{path}:2" in str(info.value)


# -- session files -------------------------------------------------------------------------------

HEADER = {
    "type": "header",
    "schema": 1,
    "id": "s1",
    "created": "2026-01-01T00:00:00+00:00",
    "cwd": "/",
    "provider": "fake",
    "model": "m",
    "context_window": 1000,
}


def _session(header: dict[str, Any] | str, *records: Any) -> str:
    first = header if isinstance(header, str) else json.dumps(header)
    rest = [r if isinstance(r, str) else json.dumps(r) for r in records]
    return "\n".join([first, *rest]) + "\n"


def _msg(*parts: dict[str, Any], role: str = "user") -> dict[str, Any]:
    return {"type": "message", "message": {"role": role, "parts": list(parts)}}


SESSIONS: list[tuple[str, str, str]] = [
    ("empty", "", "empty file"),
    ("not-header", _session({"type": "message"}), ":1:"),
    ("schema-newer", _session({**HEADER, "schema": 99}), "newer than this build"),
    ("schema-missing", _session({k: v for k, v in HEADER.items() if k != "schema"}), "schema"),
    ("schema-string", _session({**HEADER, "schema": "1"}), "schema"),
    ("id-missing", _session({k: v for k, v in HEADER.items() if k != "id"}), "'id'"),
    ("window-string", _session({**HEADER, "context_window": "1k"}), "'context_window'"),
    ("deep-header", '{"type":"header","x":' + DEEP + "}\n", ":1:"),
    ("deep-record", _session(HEADER, '{"type":"message","message":' + DEEP + "}"), ":2:"),
    ("unknown-part", _session(HEADER, _msg({"kind": "hologram"})), ":2:"),
    ("bad-role", _session(HEADER, _msg({"kind": "text", "text": "x"}, role="system")), ":2:"),
    ("text-null", _session(HEADER, _msg({"kind": "text", "text": None})), ":2:"),
    (
        "arguments-null",
        _session(
            HEADER,
            _msg(
                {"kind": "function_call", "id": "1", "name": "f", "arguments": None}, role="model"
            ),
        ),
        ":2:",
    ),
    ("state-negative", _session(HEADER, {"type": "state", "last_prompt_token_count": -1}), ":2:"),
    ("state-string", _session(HEADER, {"type": "state", "consecutive_failures": "x"}), ":2:"),
    ("history-not-list", _session(HEADER, {"type": "compaction", "info": {}, "history": 5}), ":2:"),
    ("parts-not-list", _session(HEADER, {"type": "message", "message": {"role": "user"}}), ":2:"),
    ("number-too-long", _session(HEADER, '{"type": "state", "n": ' + LONG + "}"), ":2:"),
    # A model record of the wrong types was blamed on the header (line 1).
    ("model-provider-number", _session(HEADER, {"type": "model", "provider": 5}), ":2: a model"),
    (
        "model-window-string",
        _session(
            HEADER,
            _msg({"kind": "text", "text": "x"}),
            {"type": "model", "model": "m", "context_window": "x"},
        ),
        ":3: a model record is malformed: 'context_window'",
    ),
    ("number-too-long-header", '{"type": "header", "schema": ' + LONG + "}\n", ":1:"),
]


@pytest.mark.parametrize(
    ("content", "named"), [c[1:] for c in SESSIONS], ids=[c[0] for c in SESSIONS]
)
def test_bad_session_file(tmp_path: Path, content: str, named: str) -> None:
    """A bad session file: SessionFileError naming the file (and the line when one is to blame)."""
    path = tmp_path / "s1.jsonl"
    path.write_text(content)
    with pytest.raises(SessionFileError) as info:
        load_session(path)
    assert str(path) in str(info.value)
    assert named in str(info.value)
    assert info.value.path == str(path)


def test_a_session_path_given_as_a_str_is_read(tmp_path: Path) -> None:
    """load_session takes a path as a str too (it raised a raw AttributeError, 'str' object has
    no attribute 'read_bytes', even for a good file), and a NUL in the path is a
    SessionFileError (it was a raw ValueError)."""
    with SessionStore(tmp_path).create(provider="fake", model="m", context_window=1000) as w:
        w.append_messages([Message.user("hi"), Message.model("hello")])
    saved = load_session(str(w.path))
    assert [m.text for m in saved.history] == ["hi", "hello"]
    assert saved.path == w.path
    with pytest.raises(SessionFileError, match="No such file"):
        load_session(str(tmp_path / "missing.jsonl"))
    with pytest.raises(SessionFileError, match="null byte"):
        load_session(tmp_path / "bad\x00name.jsonl")


# -- library calls -------------------------------------------------------------------------------


_TWO_TURNS = [Message.user("q"), Message.model("a"), Message.user("q2"), Message.model("a2")]


def _session_with(**kw: Any) -> ChatSession:
    return ChatSession(FakeProvider(), context_window=100_000, **kw)


def _pending_call_session() -> ChatSession:
    return _session_with(
        history=[Message.user("run ls"), Message.model(FunctionCallPart(id="c1", name="ls"))]
    )


LIBRARY: list[tuple[str, Callable[[], object], type[Exception], str]] = [
    ("send-none", lambda: _session_with().send(None), ContentError, "message"),  # type: ignore[arg-type]
    ("send-int", lambda: _session_with().send(123), ContentError, "message"),  # type: ignore[arg-type]
    ("send-bytes", lambda: _session_with().send(b"hi"), ContentError, "message"),  # type: ignore[arg-type]
    ("send-dict", lambda: _session_with().send({"role": "user"}), ContentError, "message"),  # type: ignore[arg-type]
    ("send-float", lambda: _session_with().send(3.5), ContentError, "message"),  # type: ignore[arg-type]
    ("send-list-of-str", lambda: _session_with().send(["a", "b"]), ContentError, "part"),  # type: ignore[list-item]
    ("text-none", lambda: TextPart(text=None), ContentError, "TextPart.text"),  # type: ignore[arg-type]
    ("text-bytes", lambda: TextPart(text=b"x"), ContentError, "TextPart.text"),  # type: ignore[arg-type]
    ("text-int", lambda: TextPart(text=5), ContentError, "TextPart.text"),  # type: ignore[arg-type]
    ("message-bytes", lambda: Message.user(b"x"), ContentError, "part"),  # type: ignore[arg-type]
    ("thinking-none", lambda: ThinkingPart(text=None), ContentError, "ThinkingPart.text"),  # type: ignore[arg-type]
    ("signature-int", lambda: ThinkingPart(text="t", signature=5), ContentError, "signature"),  # type: ignore[arg-type]
    (
        "call-args-none",
        lambda: FunctionCallPart(id="1", name="f", arguments=None),
        ContentError,
        "arguments",
    ),  # type: ignore[arg-type]
    (
        "call-args-list",
        lambda: FunctionCallPart(id="1", name="f", arguments=[1]),
        ContentError,
        "arguments",
    ),  # type: ignore[arg-type]
    (
        "call-args-circular",
        lambda: FunctionCallPart(id="1", name="f", arguments=_circular()),
        ContentError,
        "arguments",
    ),
    (
        "call-id-none",
        lambda: FunctionCallPart(id=None, name="f"),
        ContentError,
        "FunctionCallPart.id",
    ),  # type: ignore[arg-type]
    (
        "call-name-int",
        lambda: FunctionCallPart(id="1", name=3),
        ContentError,
        "FunctionCallPart.name",
    ),  # type: ignore[arg-type]
    (
        "result-circular",
        lambda: FunctionResponsePart(id="1", name="f", response=_circular()),
        ContentError,
        "response",
    ),
    (
        "result-deep",
        lambda: FunctionResponsePart(id="1", name="f", response=_nested(5_000)),
        ContentError,
        "response",
    ),
    (
        "result-tuple-keys",
        lambda: FunctionResponsePart(id="1", name="f", response={(1, 2): 3}),
        ContentError,
        "response",
    ),
    (
        "result-id-none",
        lambda: FunctionResponsePart(id=None, name="f", response="x"),
        ContentError,
        "FunctionResponsePart.id",
    ),  # type: ignore[arg-type]
    (
        "result-name-none",
        lambda: FunctionResponsePart(id="1", name=None, response="x"),
        ContentError,
        "FunctionResponsePart.name",
    ),  # type: ignore[arg-type]
    (
        "role-system",
        lambda: Message(role="system", parts=(TextPart(text="x"),)),
        ContentError,
        "role",
    ),  # type: ignore[arg-type]
    ("parts-str", lambda: Message(role="user", parts="abc"), ContentError, "part"),  # type: ignore[arg-type]
    ("history-str", lambda: _session_with(history="abc"), ContentError, "history"),
    ("history-bytes", lambda: _session_with(history=b"abc"), ContentError, "history"),
    ("history-dict", lambda: _session_with(history={"role": "user"}), ContentError, "history"),
    ("history-int", lambda: _session_with(history=5), ContentError, "history"),
    (
        "history-of-dicts",
        lambda: _session_with(history=[{"role": "user", "parts": []}]),
        ContentError,
        "history[0]",
    ),
    (
        "history-mixed",
        lambda: _session_with(history=[Message.user("x"), "y"]),
        ContentError,
        "history[1]",
    ),
    (
        "history-dangling-call",
        lambda: _session_with(
            history=[
                Message.user("q"),
                Message.model(FunctionCallPart(id="c1", name="ls")),
                Message.user("never answered"),
                Message.model("ok"),
            ]
        ),
        ContentError,
        "history[1]",
    ),
    (
        "history-orphaned-result",
        lambda: _session_with(
            history=[
                Message.user("q"),
                Message.model("ok"),
                Message.user(FunctionResponsePart(id="zz", name="ls", response="x")),
                Message.model("ok"),
            ]
        ),
        ContentError,
        "history[2]",
    ),
    (
        "history-starts-with-result",
        lambda: _session_with(
            history=[Message.user(FunctionResponsePart(id="1", name="ls", response="x"))]
        ),
        ContentError,
        "function response",
    ),
    (
        "send-orphaned-result",
        lambda: _session_with().send([FunctionResponsePart(id="c9", name="ls", response="x")]),
        ContentError,
        "'c9'",
    ),
    (
        "send-leaves-call-unanswered",
        lambda: _pending_call_session().send("something else"),
        ContentError,
        "'c1'",
    ),
    (
        "send-answers-wrong-call",
        lambda: _pending_call_session().send(
            [FunctionResponsePart(id="c2", name="ls", response="x")]
        ),
        ContentError,
        "'c2'",
    ),
    (
        "failures-str",
        lambda: _session_with(consecutive_failures="x"),
        ConfigError,
        "consecutive_failures",
    ),
    (
        "failures-negative",
        lambda: _session_with(consecutive_failures=-1),
        ConfigError,
        "consecutive_failures",
    ),
    (
        "failures-none",
        lambda: _session_with(consecutive_failures=None),
        ConfigError,
        "consecutive_failures",
    ),
    (
        "failures-float",
        lambda: _session_with(consecutive_failures=1.5),
        ConfigError,
        "consecutive_failures",
    ),
    (
        "failures-bool",
        lambda: _session_with(consecutive_failures=True),
        ConfigError,
        "consecutive_failures",
    ),
    (
        "count-none",
        lambda: _session_with(last_prompt_token_count=None),
        ConfigError,
        "last_prompt_token_count",
    ),
    (
        "count-str",
        lambda: _session_with(last_prompt_token_count="5"),
        ConfigError,
        "last_prompt_token_count",
    ),
    (
        "count-negative",
        lambda: _session_with(last_prompt_token_count=-3),
        ConfigError,
        "last_prompt_token_count",
    ),
    (
        "image-negative",
        lambda: _session_with(image_token_estimate=-5),
        ConfigError,
        "image_token_estimate",
    ),
    (
        "image-str",
        lambda: _session_with(image_token_estimate="x"),
        ConfigError,
        "image_token_estimate",
    ),
    (
        "max-output-zero",
        lambda: _session_with(max_output_tokens=0),
        ConfigError,
        "max_output_tokens",
    ),
    (
        "max-output-str",
        lambda: _session_with(max_output_tokens="x"),
        ConfigError,
        "max_output_tokens",
    ),
    ("system-int", lambda: _session_with(system_instruction=5), ConfigError, "system_instruction"),
    # Tool declarations of the wrong shape were accepted and failed inside the first send with a
    # raw AttributeError (each adapter reads a ToolSpec's fields) or TypeError (None).
    ("tools-none", lambda: _session_with(tools=None), ConfigError, "tools must be a sequence"),
    ("tools-str", lambda: _session_with(tools="ls"), ConfigError, "tools must be a sequence"),
    ("tools-one-spec", lambda: _session_with(tools=ToolSpec(name="ls")), ConfigError, "tools"),
    ("tools-dict", lambda: _session_with(tools=[{"name": "ls"}]), ConfigError, "tools[0]"),
    (
        "tools-dict-in-config",
        lambda: ChatSession(
            FakeProvider(), config=EngineConfig(context_window=1000, tools=[{"name": "ls"}])
        ),
        ConfigError,
        "tools[0]",
    ),
    (
        "tools-name",
        lambda: _session_with(tools=[ToolSpec(name="ls"), "cat"]),
        ConfigError,
        "tools[1]",
    ),
    # A hook not in a list raised a raw TypeError ("'function' object is not iterable"); an item
    # that is no callable was accepted and logged as a failing hook at every event.
    ("hooks-one-function", lambda: _session_with(hooks=print), ConfigError, "hooks=[hook]"),
    ("hooks-none", lambda: _session_with(hooks=None), ConfigError, "hooks must be"),
    ("hooks-item-int", lambda: _session_with(hooks=[print, 5]), ConfigError, "hooks[1]"),
    ("add-hook-int", lambda: _session_with().add_hook(5), ConfigError, "add_hook"),
    (
        "guard-hooks-one-function",
        lambda: ContextGuard(
            context_window=1000, compression=CompressionService(FakeProvider()), hooks=print
        ),
        ConfigError,
        "hooks=[hook]",
    ),
    # A calibration or growth log of another type (its saved dict form) was accepted and failed
    # inside the first send with a raw AttributeError.
    (
        "calibration-dict",
        lambda: _session_with(calibration={"factor": 1.2}),
        ConfigError,
        "calibration",
    ),
    ("growth-int", lambda: _session_with(growth=5), ConfigError, "growth"),
    ("toolspec-name-int", lambda: ToolSpec(name=5), ConfigError, "ToolSpec.name"),
    (
        "toolspec-description-none",
        lambda: ToolSpec(name="ls", description=None),
        ConfigError,
        "ToolSpec.description",
    ),
    (
        "toolspec-parameters-str",
        lambda: ToolSpec(name="ls", parameters="{}"),
        ConfigError,
        "ToolSpec.parameters",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "named"), [c[1:] for c in LIBRARY], ids=[c[0] for c in LIBRARY]
)
def test_library_misuse(call: Callable[[], object], error: type[Exception], named: str) -> None:
    """Library misuse raises the documented error, naming the argument, never a raw TypeError."""
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error
    assert named in str(info.value)


def test_pending_calls_of_the_last_model_message_are_legitimate() -> None:
    """A history ending on a model message with calls is fine; answering them sends."""
    session = _pending_call_session()
    reply = session.send([FunctionResponsePart(id="c1", name="ls", response="a.txt")])
    assert reply.text == "OK."
    assert len(session.history) == 4


def corpus_size() -> int:
    """How many bad inputs this file covers (the closing note quotes it), with issue 27's
    library doors (tests/test_bad_input_corpus_27.py)."""
    from test_bad_input_corpus_27 import corpus_size_27

    return (
        2 * len(WINDOWS) + len(SETTINGS) + 2 + len(TRANSCRIPTS) + 1 + len(SESSIONS) + len(LIBRARY)
    ) + corpus_size_27()


def test_the_corpus_has_at_least_a_hundred_cases() -> None:
    """Issue 16 asks for at least 100 bad inputs across the doors."""
    assert corpus_size() >= 100


@pytest.mark.parametrize("ending", ["\r", "\r\n"], ids=["cr", "crlf"])
@pytest.mark.parametrize("by", ["read", "detect"])
def test_lines_ended_by_carriage_returns_read_as_lines(
    tmp_path: Path, ending: str, by: str
) -> None:
    """A JSONL file whose lines end with a carriage return alone (or CRLF) is detected and read
    as the same file with line feeds; detection cut its head at line feeds only, so a
    CR-only file was "not a transcript" though the reader cuts lines as str.splitlines does."""
    lines = [_cc_user("a"), _cc_assistant({"input_tokens": 12})]
    plain, other = tmp_path / "plain.jsonl", tmp_path / "other.jsonl"
    plain.write_text("\n".join(lines) + "\n", newline="")
    other.write_text(ending.join(lines) + ending, newline="")
    if by == "detect":
        assert detect_format(other) == detect_format(plain) == "claude-code"
        return
    want, got = read_transcript(plain), read_transcript(other)
    assert (got.format, got.messages, got.calls) == (want.format, want.messages, want.calls)


def test_a_guard_still_counts_tool_declarations_given_as_json() -> None:
    """The guard sends nothing: a tool declared as a JSON object is counted as it is, as before
    (only a session, whose adapters read ToolSpec fields, requires ToolSpec objects)."""
    guard = ContextGuard(context_window=100_000, compression=CompressionService(FakeProvider()))
    bare = guard.run([Message.user("hi")])
    declared = guard.run([Message.user("hi")], tools=[{"name": "ls", "description": "x" * 400}])
    assert declared.tokens > bare.tokens
