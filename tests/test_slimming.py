"""Input slimming before the side query: big tool output cut, media replaced, rest untouched."""

from __future__ import annotations

from autocompact import (
    DocumentPart,
    FunctionCallPart,
    FunctionResponsePart,
    ImagePart,
    Message,
    TextPart,
)
from autocompact.compaction import CompressionService, CompressOptions
from autocompact.compaction.slimming import (
    MAX_FUNCTION_RESPONSE_CHARS,
    SLIM_HEAD_CHARS,
    SLIM_TAIL_CHARS,
    slim_for_summary,
)
from autocompact.testing import FakeProvider


def test_oversized_function_response_keeps_head_and_tail() -> None:
    """A response larger than the limit is cut to its head and tail with a marker."""
    body = "H" * SLIM_HEAD_CHARS + "M" * 20_000 + "T" * SLIM_TAIL_CHARS
    part = FunctionResponsePart(id="1", name="cat", response=body)
    (slim,) = slim_for_summary([Message.user(part)])
    new = slim.parts[0]
    assert isinstance(new, FunctionResponsePart)
    assert (new.id, new.name) == ("1", "cat")
    assert new.response.startswith("H" * SLIM_HEAD_CHARS + "\n[... 20,000 characters")
    assert new.response.endswith("T" * SLIM_TAIL_CHARS)
    assert "M" not in new.response
    assert new.stats.json_chars < part.stats.json_chars


def test_object_response_is_cut_by_its_json_form() -> None:
    """A large non-string response is measured and cut through its JSON form."""
    part = FunctionResponsePart(id="1", name="ls", response={"files": ["f" * 50] * 500})
    assert part.stats.json_chars > MAX_FUNCTION_RESPONSE_CHARS
    (slim,) = slim_for_summary([Message.user(part)])
    assert isinstance(slim.parts[0], FunctionResponsePart)
    assert "omitted before summarizing" in slim.parts[0].response


def test_small_response_and_text_are_the_same_objects() -> None:
    """Messages with nothing to slim come back as the very same objects."""
    history = [
        Message.user("hello " * 5_000),
        Message.model(FunctionCallPart(id="1", name="ls")),
        Message.user(FunctionResponsePart(id="1", name="ls", response="small")),
    ]
    slimmed = slim_for_summary(history)
    assert all(a is b for a, b in zip(slimmed, history, strict=True))


def test_images_and_documents_become_placeholders() -> None:
    """Images and documents are replaced by short text placeholders naming their type."""
    msg = Message.user(
        "look",
        ImagePart(media_type="image/jpeg", data="A" * 10_000),
        DocumentPart(title="spec", url="u"),
    )
    (slim,) = slim_for_summary([msg])
    assert slim.parts[0] == TextPart(text="look")
    assert all(isinstance(p, TextPart) for p in slim.parts)
    assert "image/jpeg" in slim.parts[1].text  # type: ignore[union-attr]
    assert "'spec'" in slim.parts[2].text  # type: ignore[union-attr]


def test_the_limit_is_configurable() -> None:
    """max_response_chars sets the size above which a response is cut."""
    part = FunctionResponsePart(id="1", name="t", response="x" * 5_000)
    (kept,) = slim_for_summary([Message.user(part)])
    assert kept.parts[0] is part
    (cut,) = slim_for_summary([Message.user(part)], max_response_chars=100)
    assert cut.parts[0] is not part


def test_side_query_carries_slimmed_input_but_history_keeps_the_original() -> None:
    """The side query sees the slimmed messages; the kept history is not slimmed."""
    big = FunctionResponsePart(id="1", name="cat", response="z" * 50_000)
    history = (
        Message.user("read it", ImagePart(data="A" * 100)),
        Message.model(FunctionCallPart(id="1", name="cat")),
        Message.user(big),
        Message.model("read"),
        Message.user("next " * 10),
        Message.model("done"),
    )
    fake = FakeProvider()
    result = CompressionService(fake).compress(
        history, CompressOptions(context_window=1_000_000, force=True)
    )
    sent = fake.requests[0].messages
    responses = [p for m in sent for p in m.function_responses]
    assert responses
    assert all(len(p.response) < 10_000 for p in responses)
    assert not any(isinstance(p, ImagePart) for m in sent for p in m.parts)
    assert history[2].parts[0] is big
    assert result.info.compressed_messages >= 3
