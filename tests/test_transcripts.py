"""Transcript readers on small fixtures written here: one test group per format."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from autocompact.compaction import CompressionInfo, CompressionStatus, CompressionTrigger
from autocompact.content import (
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
)
from autocompact.errors import TranscriptFormatError
from autocompact.sessions import SessionStore
from autocompact.transcripts import detect_format, read_transcript

PNG = "iVBORw0KGgo="


def write_jsonl(path: Path, objects: list[Any], *, gz: bool = False) -> Path:
    text = "".join(json.dumps(o) + "\n" for o in objects)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# -- Claude Code -----------------------------------------------------------------------------------


def cc_user(content: Any, **extra: Any) -> dict[str, Any]:
    return {
        "type": "user",
        "sessionId": "s",
        "message": {"role": "user", "content": content},
        **extra,
    }


def cc_assistant(
    msg_id: str, blocks: list[Any], *, inp: int, create: int = 0, read: int = 0, out: int = 5
) -> dict[str, Any]:
    usage = {
        "input_tokens": inp,
        "cache_creation_input_tokens": create,
        "cache_read_input_tokens": read,
        "output_tokens": out,
    }
    message = {"id": msg_id, "model": "claude-x", "role": "assistant", "content": blocks}
    return {"type": "assistant", "sessionId": "s", "message": {**message, "usage": usage}}


def claude_session() -> list[Any]:
    return [
        {"type": "file-history-snapshot", "messageId": "m0", "snapshot": {}},
        {"type": "progress", "sessionId": "s", "data": {"type": "hook_progress"}},
        cc_user("fix the bug"),
        # One API response split over three lines sharing message.id.
        cc_assistant(
            "msg_1",
            [{"type": "thinking", "thinking": "hmm", "signature": "sig"}],
            inp=3,
            create=1000,
            read=20000,
            out=5,
        ),
        cc_assistant(
            "msg_1",
            [{"type": "text", "text": "Let me look."}],
            inp=3,
            create=1000,
            read=20000,
            out=5,
        ),
        cc_assistant(
            "msg_1",
            [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.py"}}],
            inp=3,
            create=1000,
            read=20000,
            out=42,
        ),
        cc_user(
            [{"type": "tool_result", "tool_use_id": "t1", "content": "print('hi')"}],
            toolUseResult={"stdout": "A MUCH LONGER UI COPY " * 50},
        ),
        {"type": "system", "subtype": "stop_hook_summary", "sessionId": "s"},
        cc_user(
            [
                {"type": "text", "text": "see this"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
            ]
        ),
        cc_assistant("msg_2", [{"type": "text", "text": "Fixed."}], inp=10, read=21500, out=7),
        # A sub-agent's line inside the main session: not part of this conversation.
        {**cc_user("sub-agent prompt"), "isSidechain": True},
        {
            "type": "system",
            "subtype": "compact_boundary",
            "sessionId": "s",
            "compactMetadata": {"trigger": "auto", "preTokens": 21510},
        },
        cc_user(
            "This session is being continued... summary",
            isCompactSummary=True,
            isVisibleInTranscriptOnly=True,
        ),
        cc_user("next task"),
        cc_assistant("msg_3", [{"type": "text", "text": "ok"}], inp=5, create=8000, out=3),
    ]


def test_claude_code_merges_split_responses_and_counts_each_call_once(tmp_path: Path) -> None:
    """Lines sharing message.id become one model message and one call (input+cache sizes)."""
    transcript = read_transcript(write_jsonl(tmp_path / "s.jsonl", claude_session()))
    assert transcript.format == "claude-code"
    assert [c.prompt_tokens for c in transcript.calls] == [21003, 21510, 8005]
    first = transcript.messages[transcript.calls[0].preceding]
    assert first.role == "model"
    assert [type(p) for p in first.parts] == [ThinkingPart, TextPart, FunctionCallPart]
    assert transcript.calls[0].output_tokens == 42
    assert transcript.calls[0].preceding == 1
    assert transcript.calls[1].preceding == 4


def test_claude_code_reads_tool_results_not_the_ui_copy(tmp_path: Path) -> None:
    """The tool_result block is read; toolUseResult (a UI copy) is never counted."""
    transcript = read_transcript(write_jsonl(tmp_path / "s.jsonl", claude_session()))
    result = transcript.messages[2].parts[0]
    assert isinstance(result, FunctionResponsePart)
    assert result.response == "print('hi')"
    assert result.name == "Read"
    assert "UI COPY" not in json.dumps([str(m) for m in transcript.messages])


def test_claude_code_images_become_image_parts(tmp_path: Path) -> None:
    """An image block in a user message is an ImagePart with its data."""
    transcript = read_transcript(write_jsonl(tmp_path / "s.jsonl", claude_session()))
    image = transcript.messages[3].parts[1]
    assert isinstance(image, ImagePart)
    assert image.data == PNG


def test_claude_code_compaction_marker_and_summary(tmp_path: Path) -> None:
    """compact_boundary starts a new context whose first message is the summary."""
    transcript = read_transcript(write_jsonl(tmp_path / "s.jsonl", claude_session()))
    (marker,) = transcript.compactions
    assert marker.trigger == "auto"
    assert marker.pre_tokens == 21510
    assert marker.post_tokens == 8005
    assert marker.position == 5
    assert transcript.summary_positions == frozenset({5})
    last = transcript.calls[-1]
    assert last.context_start == 5
    assert [m.text for m in transcript.context_before(last)] == [
        "This session is being continued... summary",
        "next task",
    ]


def test_claude_code_skips_sidechain_progress_and_system_lines(tmp_path: Path) -> None:
    """Sub-agent, progress and system lines are not conversation."""
    transcript = read_transcript(write_jsonl(tmp_path / "s.jsonl", claude_session()))
    texts = [m.text for m in transcript.messages]
    assert "sub-agent prompt" not in texts
    assert len(transcript.messages) == 8


def test_claude_code_subagent_file_is_read(tmp_path: Path) -> None:
    """A file whose every conversation line is a sidechain (a sub-agent log) is read."""
    lines = [
        {**cc_user("explore the repo"), "isSidechain": True},
        {**cc_assistant("m", [{"type": "text", "text": "done"}], inp=12000), "isSidechain": True},
    ]
    transcript = read_transcript(write_jsonl(tmp_path / "agent.jsonl", lines))
    assert [c.prompt_tokens for c in transcript.calls] == [12000]
    assert transcript.messages[0].text == "explore the repo"


def _enqueue(text: str) -> dict[str, Any]:
    return {"type": "queue-operation", "operation": "enqueue", "sessionId": "s", "content": text}


def test_claude_code_keeps_queued_prompts_in_their_place(tmp_path: Path) -> None:
    """A prompt queued while a call waits joins the tool result (pairing kept); one queued
    between turns is a user message of its own; ``remove`` lines add nothing."""
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make"}}
    lines = [
        cc_user("build it"),
        cc_assistant("m1", [call], inp=100),
        _enqueue("actually target arm64 only"),
        {"type": "queue-operation", "operation": "remove", "sessionId": "s"},
        cc_user([{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]),
        cc_assistant("m2", [{"type": "text", "text": "Built."}], inp=120),
        _enqueue("now ship it"),
        cc_assistant("m3", [{"type": "text", "text": "Shipping."}], inp=130),
    ]
    transcript = read_transcript(write_jsonl(tmp_path / "q.jsonl", lines))
    texts = [m.text for m in transcript.messages]
    assert texts == [
        "build it",
        "",
        "actually target arm64 only",
        "Built.",
        "now ship it",
        "Shipping.",
    ]
    joined = transcript.messages[2]
    assert isinstance(joined.parts[0], FunctionResponsePart)
    assert joined.parts[1] == TextPart(text="actually target arm64 only")
    assert [c.preceding for c in transcript.calls] == [1, 3, 5]


def test_claude_code_gzip_is_read_directly(tmp_path: Path) -> None:
    """A gzip'd log is detected by content and read like the plain one."""
    plain = read_transcript(write_jsonl(tmp_path / "s.jsonl", claude_session()))
    packed = read_transcript(write_jsonl(tmp_path / "s.data", claude_session(), gz=True))
    assert packed.messages == plain.messages
    assert packed.calls == plain.calls


def test_claude_code_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    """A line that is not JSON raises TranscriptFormatError naming the file and line."""
    path = write_jsonl(tmp_path / "s.jsonl", claude_session()[:4])
    with path.open("a") as handle:
        handle.write('{"type": "user", "message": \n')
    with pytest.raises(TranscriptFormatError) as info:
        read_transcript(path)
    assert info.value.line == 5
    assert str(info.value).startswith(f"{path}:5: not valid JSON")


def test_claude_code_bad_block_names_the_line(tmp_path: Path) -> None:
    """An unknown content block is an error on its line, not silently dropped."""
    lines = [cc_user("hi"), cc_user([{"type": "hologram"}])]
    with pytest.raises(TranscriptFormatError, match=r"s.jsonl:2: .*hologram"):
        read_transcript(write_jsonl(tmp_path / "s.jsonl", lines))


# -- qwen-code -------------------------------------------------------------------------------------


def qwen_record(kind: str, message: Any = None, **extra: Any) -> dict[str, Any]:
    record = {
        "uuid": "u",
        "parentUuid": None,
        "sessionId": "s",
        "timestamp": "t",
        "type": kind,
        "cwd": "/w",
        "version": "1",
    }
    if message is not None:
        record["message"] = message
    return {**record, **extra}


def qwen_session() -> list[Any]:
    return [
        qwen_record(
            "user",
            {
                "role": "user",
                "parts": [
                    {"text": "describe"},
                    {"inlineData": {"mimeType": "image/png", "data": PNG}},
                ],
            },
        ),
        qwen_record(
            "assistant",
            {
                "role": "model",
                "parts": [
                    {"text": "thinking...", "thought": True},
                    {"functionCall": {"id": "c1", "name": "read_file", "args": {"path": "x"}}},
                ],
            },
            usageMetadata={
                "promptTokenCount": 9000,
                "candidatesTokenCount": 30,
                "totalTokenCount": 9030,
            },
            model="qwen3-coder",
        ),
        qwen_record(
            "tool_result",
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "id": "c1",
                            "name": "read_file",
                            "response": {"output": "x=1"},
                        }
                    },
                ],
            },
        ),
        qwen_record(
            "assistant",
            {"role": "model", "parts": [{"text": "x is 1"}]},
            usageMetadata={"totalTokenCount": 9500, "candidatesTokenCount": 100},
        ),
        qwen_record("system", subtype="ui_telemetry", systemPayload={"uiEvent": {}}),
        qwen_record(
            "system",
            subtype="chat_compression",
            systemPayload={
                "info": {"originalTokenCount": 9500, "newTokenCount": 700, "compressionStatus": 1},
                "compressedHistory": [
                    {"role": "user", "parts": [{"text": "<state_snapshot>...</state_snapshot>"}]},
                    {"role": "model", "parts": [{"text": "Got it."}]},
                ],
            },
        ),
        qwen_record("user", {"role": "user", "parts": [{"text": "and now?"}]}),
        qwen_record(
            "assistant",
            {"role": "model", "parts": [{"text": "done"}]},
            usageMetadata={"promptTokenCount": 800, "candidatesTokenCount": 2},
        ),
    ]


def test_qwen_code_calls_parts_and_compression(tmp_path: Path) -> None:
    """usageMetadata gives each call's size; chat_compression starts a new context."""
    path = write_jsonl(tmp_path / "q.jsonl", qwen_session())
    assert detect_format(path) == "qwen-code"
    transcript = read_transcript(path)
    assert [c.prompt_tokens for c in transcript.calls] == [9000, 9400, 800]
    assert transcript.calls[0].model == "qwen3-coder"
    assert isinstance(transcript.messages[0].parts[1], ImagePart)
    assert isinstance(transcript.messages[1].parts[0], ThinkingPart)
    response = transcript.messages[2].parts[0]
    assert isinstance(response, FunctionResponsePart)
    assert response.response == {"output": "x=1"}
    (marker,) = transcript.compactions
    assert (marker.pre_tokens, marker.post_tokens, marker.position) == (9500, 700, 4)
    assert transcript.summary_positions == frozenset({4, 5})
    assert len(transcript.context_before(transcript.calls[-1])) == 3


def test_qwen_code_malformed_record(tmp_path: Path) -> None:
    """A record whose message has an unknown part names the line."""
    lines = [*qwen_session()[:2], qwen_record("user", {"role": "user", "parts": [{"hologram": 1}]})]
    with pytest.raises(TranscriptFormatError, match=r"q.jsonl:3: .*unknown part"):
        read_transcript(write_jsonl(tmp_path / "q.jsonl", lines))


# -- gemini-cli ------------------------------------------------------------------------------------


def gemini_document() -> dict[str, Any]:
    return {
        "sessionId": "s",
        "projectHash": "h",
        "startTime": "t",
        "lastUpdated": "t",
        "messages": [
            {"id": "1", "timestamp": "t", "type": "user", "content": "list files"},
            {
                "id": "2",
                "timestamp": "t",
                "type": "gemini",
                "content": "",
                "toolCalls": [
                    {
                        "id": "ls-1",
                        "name": "list_directory",
                        "args": {"path": "."},
                        "status": "success",
                        "timestamp": "t",
                        "result": [
                            {
                                "functionResponse": {
                                    "id": "ls-1",
                                    "name": "list_directory",
                                    "response": {"output": "a.py"},
                                }
                            }
                        ],
                    }
                ],
                "thoughts": [{"subject": "plan", "description": "list", "timestamp": "t"}],
                "tokens": {
                    "input": 7000,
                    "output": 20,
                    "cached": 6000,
                    "thoughts": 5,
                    "tool": 0,
                    "total": 7025,
                },
                "model": "gemini-2.5-pro",
            },
            {"id": "3", "timestamp": "t", "type": "info", "content": "Tool approved"},
            {
                "id": "4",
                "timestamp": "t",
                "type": "gemini",
                "content": "One file: a.py",
                "tokens": {"input": 7100, "output": 8, "cached": 0, "total": 7108},
            },
            {
                "id": "5",
                "timestamp": "t",
                "type": "user",
                "content": [
                    {"text": "and this?"},
                    {"inlineData": {"mimeType": "image/jpeg", "data": PNG}},
                ],
            },
        ],
    }


def test_gemini_cli_tool_calls_results_and_tokens(tmp_path: Path) -> None:
    """A gemini record is one call (tokens.input); its tool results follow as a user turn."""
    path = tmp_path / "session-1.json"
    path.write_text(json.dumps(gemini_document()))
    assert detect_format(path) == "gemini-cli"
    transcript = read_transcript(path)
    assert [c.prompt_tokens for c in transcript.calls] == [7000, 7100]
    assert [c.preceding for c in transcript.calls] == [1, 3]
    model, results = transcript.messages[1], transcript.messages[2]
    assert model.function_calls[0].name == "list_directory"
    assert results.function_responses[0].response == {"output": "a.py"}
    assert results.function_responses[0].id == "ls-1"
    assert isinstance(transcript.messages[-1].parts[1], ImagePart)
    assert all("Tool approved" not in m.text for m in transcript.messages)


def test_gemini_cli_bad_json_names_the_line(tmp_path: Path) -> None:
    """A damaged JSON document names the line of the damage."""
    path = tmp_path / "session-1.json"
    path.write_text('{\n "sessionId": "s",\n "messages": [\n  {"type": "user",, }\n ]\n}')
    with pytest.raises(TranscriptFormatError) as info:
        read_transcript(path)
    assert info.value.line == 4


# -- OpenAI JSON -----------------------------------------------------------------------------------


def openai_messages() -> list[Any]:
    return [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is in it?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "grep", "arguments": '{"q": "x"}'},
                }
            ],
            "usage": {"prompt_tokens": 1200, "completion_tokens": 15},
        },
        {"role": "tool", "tool_call_id": "c1", "content": "x found"},
        {"role": "assistant", "content": "It has x."},
        {"role": "user", "content": "thanks"},
        {
            "role": "assistant",
            "content": "welcome",
            "usage": {"prompt_tokens": 1300, "completion_tokens": 2},
        },
    ]


def test_openai_json_usage_per_assistant_message(tmp_path: Path) -> None:
    """Each assistant message with usage is one call preceded by everything before it."""
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(openai_messages()))
    assert detect_format(path) == "openai-json"
    transcript = read_transcript(path)
    assert transcript.system_instruction == "be brief"
    assert [(c.prompt_tokens, c.output_tokens) for c in transcript.calls] == [(1200, 15), (1300, 2)]
    assert [c.preceding for c in transcript.calls] == [1, 5]
    assert isinstance(transcript.messages[0].parts[1], ImagePart)
    assert transcript.messages[2].function_responses[0].name == "grep"


def test_openai_json_bad_message_names_position(tmp_path: Path) -> None:
    """An unknown role is reported with the file and the message's position."""
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "robot"}]))
    with pytest.raises(TranscriptFormatError, match=r"chat.json:2: .*robot"):
        read_transcript(path, format="openai-json")


# -- autocompact sessions --------------------------------------------------------------------------


def test_autocompact_session_written_by_the_session_store(tmp_path: Path) -> None:
    """A session saved through autocompact.sessions reads back with its calls and compaction."""
    store = SessionStore(tmp_path / "sessions")
    writer = store.create(
        provider="fake",
        model="m",
        context_window=10_000,
        cwd=tmp_path,
        system_instruction="sys",
        session_id="abc",
    )
    writer.append_messages([Message.user("one"), Message.model("reply one")])
    writer.record_state(last_prompt_token_count=500, consecutive_failures=0)
    writer.append_messages([Message.user("two"), Message.model("reply two")])
    writer.record_state(last_prompt_token_count=900, consecutive_failures=0)
    info = CompressionInfo(
        status=CompressionStatus.COMPRESSED,
        trigger=CompressionTrigger.AUTO,
        original_token_count=900,
        new_token_count=200,
    )
    writer.record_compaction(info, [Message.user("summary"), Message.model("ack")])
    writer.append_messages([Message.user("three"), Message.model("reply three")])
    writer.record_state(last_prompt_token_count=300, consecutive_failures=0)
    writer.close()

    path = store.path_of("abc")
    assert detect_format(path) == "autocompact-session"
    transcript = read_transcript(path)
    assert transcript.system_instruction == "sys"
    assert [c.prompt_tokens for c in transcript.calls] == [500, 900, 300]
    assert [c.preceding for c in transcript.calls] == [1, 3, 7]
    (marker,) = transcript.compactions
    assert (marker.position, marker.pre_tokens, marker.post_tokens) == (4, 900, 200)
    assert [m.text for m in transcript.context_before(transcript.calls[2])] == [
        "summary",
        "ack",
        "three",
    ]


def test_autocompact_session_newer_schema_is_refused(tmp_path: Path) -> None:
    """A header with a schema newer than this build is an error on line 1."""
    path = write_jsonl(tmp_path / "s.jsonl", [{"type": "header", "schema": 999}])
    with pytest.raises(TranscriptFormatError, match=r"s.jsonl:1: session schema 999"):
        read_transcript(path)


# -- detection -------------------------------------------------------------------------------------


def test_unknown_and_empty_files_are_refused(tmp_path: Path) -> None:
    """Files of no known format, or empty, raise an error naming the file."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(TranscriptFormatError, match="empty"):
        read_transcript(empty)
    other = write_jsonl(tmp_path / "other.jsonl", [{"hello": 1}, {"hello": 2}])
    with pytest.raises(TranscriptFormatError, match="not a transcript autocompact reads"):
        read_transcript(other)
    with pytest.raises(TranscriptFormatError, match="cannot read"):
        read_transcript(tmp_path / "missing.jsonl")


def test_detection_reads_whole_long_first_lines(tmp_path: Path) -> None:
    """A log whose first line is longer than any fixed buffer is still detected."""
    lines = [
        cc_user("x" * 200_000),
        cc_assistant("m", [{"type": "text", "text": "ok"}], inp=60_000),
    ]
    path = write_jsonl(tmp_path / "long.jsonl", lines, gz=True)
    assert detect_format(path) == "claude-code"
    assert read_transcript(path).calls[0].prompt_tokens == 60_000


def test_formats_name_the_readers_modules() -> None:
    """FORMATS lists each reader module's FORMAT (two of them are imported only when needed)."""
    from autocompact.transcripts import (
        FORMATS,
        autocompact_session,
        claude_code,
        gemini_cli,
        openai_json,
        qwen_code,
    )

    modules = (claude_code, qwen_code, gemini_cli, openai_json, autocompact_session)
    assert tuple(module.FORMAT for module in modules) == FORMATS


@pytest.mark.parametrize("gz", [False, True])
def test_detected_transcript_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool
) -> None:
    """Detection and reading share one read of the file: the head is cut from its content."""
    import autocompact.transcripts as transcripts
    from autocompact.transcripts import _base

    path = write_jsonl(tmp_path / "s.jsonl", claude_session(), gz=gz)
    expected = read_transcript(path)
    reads: list[Path] = []
    real = _base.read_bytes

    def counted(where: Path) -> bytes:
        reads.append(where)
        return real(where)

    def refused(where: Path, count: int) -> list[str]:
        raise AssertionError("the head is cut from the content already read")

    monkeypatch.setattr(transcripts, "read_bytes", counted)
    monkeypatch.setattr(_base, "read_bytes", counted)
    monkeypatch.setattr(transcripts, "read_first_lines", refused)
    assert read_transcript(path) == expected
    assert reads == [path]


def test_head_cut_from_content_matches_the_file_head(tmp_path: Path) -> None:
    """first_lines cuts content as read_first_lines reads the file: "\\n" kept, bad bytes
    replaced, other line ends left inside a line, a last line without "\\n"."""
    from autocompact.transcripts._base import first_lines, read_first_lines

    data = b'{"a": 1}\r\n\n  \n{"b": "\xff\xe2\x80\xa8"}\x0c\n' + b"x" * 70_000 + b"\nlast"
    path = tmp_path / "head.jsonl"
    path.write_bytes(data)
    zipped = tmp_path / "head.jsonl.gz"
    zipped.write_bytes(gzip.compress(data))
    for count in (1, 3, 5, 6, 20):
        assert first_lines(data, count) == read_first_lines(path, count)
        assert first_lines(data, count) == read_first_lines(zipped, count)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert first_lines(b"", 20) == read_first_lines(empty, 20) == []


def test_head_objects_are_parsed_as_far_as_detection_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Detection parses the head lines it reads (a Claude Code log: the first), and the head
    holds the same objects as parsing every line up to the first that is not an object."""
    import autocompact.transcripts as transcripts

    head = transcripts._HeadObjects(['{"a": 1}\n', '{"b": [2]}', "[3]", '{"c": 4}'])
    assert list(head) == [{"a": 1}, {"b": [2]}]
    assert len(head) == 2
    assert head[-1] == {"b": [2]}
    assert head[:5] == [{"a": 1}, {"b": [2]}]
    assert not transcripts._HeadObjects(["not json", '{"a": 1}'])
    assert not transcripts._HeadObjects([])
    assert list(transcripts._HeadObjects(['{"a": 1}', '{"b"'])) == [{"a": 1}]

    parsed: list[str] = []
    real = transcripts.jsonsafe.loads

    def counted(text: str) -> object:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(transcripts.jsonsafe, "loads", counted)
    path = write_jsonl(tmp_path / "s.jsonl", claude_session())
    assert detect_format(path) == "claude-code"
    assert len(parsed) == 1
