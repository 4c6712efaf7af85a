"""What the proxy does when the upstream rejects what it sent (official SDKs, scripted upstream).

The scripted upstream counts tokens as bytes/3 and rejects a request over its 8,000 tokens as
too long; here its error states no window, and the proxy sizes on a larger one (100,000), so
only the rejection tells it the request was too long.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anthropic
import openai
import pytest

from autocompact import MAX_CONSECUTIVE_FAILURES

from .conftest import Proxy
from .scripted import count_tokens
from .test_compaction import _long_anthropic, _records, filler


def _unstated(proxy: Proxy) -> anthropic.Anthropic:
    """A client of the proxy sized on 100,000 tokens over the 8,000 upstream that says "too
    long" without its window."""
    proxy.app.config = replace(proxy.app.config, context_window=100_000)
    proxy.upstream.states_window = False
    return anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0)


def _main_bodies(proxy: Proxy) -> list[bytes]:
    """The bodies the upstream received, summary requests left out."""
    return [
        raw
        for raw in proxy.upstream.received
        if "structured state snapshot" not in str(json.loads(raw).get("system"))
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_too_long_rejection_stating_no_window_is_retried_smaller(
    proxy: Proxy, stream: bool
) -> None:
    """A request rejected as too long by an upstream that does not say its window goes out
    again smaller than the rejected one, sized under what the rejected one measured: the
    window is at most that. The reactive compaction was sized on the proxy's window, its
    summary request (most of the request) was rejected too, the request went out again
    unchanged and the client got the 400."""
    client = _unstated(proxy)
    body = _long_anthropic(24)
    if stream:
        with client.messages.stream(**body) as events:
            assert events.get_final_message().content[0].text.startswith("ok")  # type: ignore[union-attr]
            action = events.response.headers["x-autocompact-action"]
    else:
        raw = client.messages.with_raw_response.create(**body)
        action = raw.headers["x-autocompact-action"]
        assert raw.parse().content[0].text.startswith("ok")  # type: ignore[union-attr]
    assert action in ("compacted", "trimmed")
    rejected, retried = _main_bodies(proxy)
    assert count_tokens(json.loads(rejected)) > proxy.upstream.window
    assert count_tokens(json.loads(retried)) <= proxy.upstream.window


@pytest.mark.parametrize("states", [False, True], ids=["no-window", "window"])
def test_a_too_long_rejection_that_cannot_be_shrunk_is_passed_back(
    proxy: Proxy, states: bool
) -> None:
    """A request rejected as too long that the proxy cannot make smaller (one message, no
    history to compact or leave out), whether the error states the window or not, is not sent
    again: the client gets the upstream's own error. The proxy sent the same bytes once more,
    certain to be rejected again."""
    client = _unstated(proxy)
    proxy.upstream.states_window = states
    body = {
        "model": "scripted",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": filler(1, 30_000)}],
    }
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(**body)  # type: ignore[arg-type]
    assert caught.value.status_code == 400
    error = caught.value.body["error"]  # type: ignore[index]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("prompt is too long")
    assert caught.value.response.headers["x-autocompact-action"] != "error"
    assert len(proxy.upstream.received) == 1
    assert proxy.upstream.rejected == 1


def _refuse_summaries(body: dict[str, Any]) -> str | None:
    """A validation error for a request that carries a summary (a compacted one)."""
    if "state_snapshot" in json.dumps(body["messages"]):
        return "messages.0.content.0: unexpected field in the summary"
    return None


def _compacting(proxy: Proxy) -> anthropic.Anthropic:
    """A client of the proxy sized on 6,000 tokens over the 8,000 upstream: compacted requests
    fit, and so do the client's own."""
    proxy.app.config = replace(proxy.app.config, context_window=6_000)
    return anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_rewritten_request_rejected_falls_back_to_the_clients(
    proxy: Proxy, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A compacted request the upstream rejects with a 400 that is not "too long" (a
    validation error the rewrite caused) is logged with the upstream's reason, and the
    client's own request goes out once: the client gets its answer, and the compaction is not
    stored. The client got the 400, although its own request was accepted."""
    caplog.set_level(logging.INFO, logger="autocompact.serve")
    client = _compacting(proxy)
    proxy.upstream.refuse = _refuse_summaries
    body = _long_anthropic(14)
    if stream:
        with client.messages.stream(**body) as events:
            assert events.get_final_message().content[0].text.startswith("ok")  # type: ignore[union-attr]
            headers = events.response.headers
    else:
        raw = client.messages.with_raw_response.create(**body)
        assert raw.parse().content[0].text.startswith("ok")  # type: ignore[union-attr]
        headers = raw.headers
    assert headers["x-autocompact-action"] == "rewrite-rejected"
    assert headers["x-autocompact-compacted"] == "false"
    rewritten, own = _main_bodies(proxy)
    assert b"state_snapshot" in rewritten
    assert json.loads(own)["messages"] == body["messages"]
    assert proxy.upstream.summaries >= 1
    assert _records(proxy) == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "rejected the compacted request with HTTP 400" in line
        and "unexpected field in the summary" in line
        and "client's own request" in line
        for line in warnings
    ), warnings


@pytest.mark.parametrize("status", [401, 403, 404, 429, 500, 503])
def test_a_rewritten_request_rejected_for_another_cause_is_not_sent_again(
    proxy: Proxy, status: int
) -> None:
    """A compacted request answered with a status the rewrite cannot have caused (credentials,
    no such model, rate limit, the server's own failure) goes back to the client as it is; the
    client's request is not sent."""
    client = _compacting(proxy)
    proxy.upstream.refuse = _refuse_summaries
    proxy.upstream.refuse_status = status
    with pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(**_long_anthropic(14))  # type: ignore[arg-type]
    assert caught.value.status_code == status
    assert caught.value.response.headers["x-autocompact-action"] == "compacted"
    assert len(_main_bodies(proxy)) == 1


def test_a_client_request_rejected_is_not_sent_again(proxy: Proxy) -> None:
    """A request that went out as the client sent it and is rejected with a 400 that is not
    "too long" goes back to the client as it is, sent once."""
    client = _compacting(proxy)
    proxy.upstream.refuse = lambda body: "max_tokens: must be positive"
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(**_long_anthropic(2))  # type: ignore[arg-type]
    assert caught.value.response.headers["x-autocompact-action"] == "forward"
    assert "max_tokens: must be positive" in caught.value.message
    assert len(proxy.upstream.received) == 1


def _refuse_record(record: bytes) -> Callable[[dict[str, Any]], str | None]:
    """A validation error for a request whose messages open with the stored ``record``'s."""
    replacement = json.loads(record)

    def refuse(body: dict[str, Any]) -> str | None:
        if body["messages"][: len(replacement)] == replacement:
            return "messages.0.content: this upstream refuses the stored summary"
        return None

    return refuse


@pytest.mark.parametrize("own", ["taken", "too-long"])
def test_a_stored_substitution_refused_is_not_sent_again(
    proxy: Proxy, own: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A stored substitution the upstream refuses, while it takes the client's own request or
    refuses it only as too long, is refused once: it is logged and no longer used, so the next
    requests of the conversation are planned from the client's own messages (compacted anew)
    and not refused again. It was kept, and every later request went out rewritten, was
    refused, and went out again as the client sent it."""
    caplog.set_level(logging.INFO, logger="autocompact.serve")
    client = _compacting(proxy)
    body = _long_anthropic(14)
    first = client.messages.with_raw_response.create(**body)  # type: ignore[arg-type]
    assert first.headers["x-autocompact-action"] == "compacted"
    (record,) = _records(proxy)
    refuse = proxy.upstream.refuse = _refuse_record(record)
    if own == "too-long":  # the client's own request no longer fits; a compacted one does
        proxy.upstream.window = 5_000
    actions = []
    for turn in range(3):
        body["messages"] += [
            {"role": "assistant", "content": [{"type": "text", "text": f"ok {turn}"}]},
            {"role": "user", "content": f"one more {turn}"},
        ]
        if own == "too-long" and turn == 0:  # the client gets the upstream's answer
            with pytest.raises(anthropic.BadRequestError, match="prompt is too long") as caught:
                client.messages.create(**body)  # type: ignore[arg-type]
            actions.append(caught.value.response.headers["x-autocompact-action"])
            continue
        raw = client.messages.with_raw_response.create(**body)  # type: ignore[arg-type]
        assert raw.parse().content[0].text.startswith("ok")  # type: ignore[union-attr]
        actions.append(raw.headers["x-autocompact-action"])
    later = [json.loads(b) for b in _main_bodies(proxy)[1:]]
    assert sum(refuse(b) is not None for b in later) == 1, actions
    assert actions == ["rewrite-rejected", "compacted", "substituted"]
    warnings = [r.getMessage() for r in caplog.records if "no longer used" in r.getMessage()]
    assert len(warnings) == 1, warnings


def _refuse_compacted(body: dict[str, Any]) -> str | None:
    """A validation error for a chat or Responses request that carries a summary."""
    if "state_snapshot" in json.dumps(body.get("messages") or body.get("input")):
        return "messages.0.content: unexpected field in the summary"
    return None


@pytest.mark.parametrize(
    ("api", "window", "size"),
    [("chat", 6_000, 1_200), ("responses", 100_000, 24_200)],
    ids=["chat-hard-is-auto", "responses-auto-below-hard"],
)
def test_fresh_compactions_refused_open_the_breaker(
    proxy: Proxy, caplog: pytest.LogCaptureFixture, api: str, window: int, size: int
) -> None:
    """Fresh compactions the upstream refuses (it takes the client's own requests) count as
    failed compactions: after the breaker's limit the conversation's requests go out with no
    summary request and no refused rewrite, and the breaker's opening is logged once, with
    why. Every request compacted anew, was refused and went out again: the breaker never
    opened."""
    caplog.set_level(logging.INFO, logger="autocompact.serve")
    proxy.app.config = replace(proxy.app.config, context_window=window)
    proxy.upstream.window = 4 * window
    proxy.upstream.bytes_per_token = 4  # (Responses) the engine's estimate, nearly
    proxy.upstream.refuse = _refuse_compacted
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
    messages: list[dict[str, Any]] = []
    for turn in range(12):
        messages.append({"role": "user", "content": f"step {turn}: " + filler(turn, size)})
        messages.append({"role": "assistant", "content": f"d{turn}"})
    actions, summaries = [], []
    for turn in range(12):
        messages.append({"role": "user", "content": f"step {12 + turn}: " + filler(turn, 600)})
        if api == "chat":
            raw: Any = client.chat.completions.with_raw_response.create(
                model="scripted",
                messages=messages,  # type: ignore[arg-type]
            )
            assert raw.parse().choices[0].message.content.startswith("ok")
        else:
            raw = client.responses.with_raw_response.create(model="scripted", input=messages)  # type: ignore[arg-type]
            assert raw.parse().output_text.startswith("ok")
        actions.append(raw.headers["x-autocompact-action"])
        summaries.append(proxy.upstream.summaries)
        messages.append({"role": "assistant", "content": f"ok {turn}"})
    assert actions.count("rewrite-rejected") == MAX_CONSECUTIVE_FAILURES, actions
    last = len(actions) - 1 - actions[::-1].index("rewrite-rejected")
    assert last < len(actions) - 2, actions  # requests went out after the breaker opened
    # (the small window's rescues hold between refusals: a trimmed request went out meanwhile)
    assert summaries[last:] == [summaries[last]] * (len(actions) - last), summaries
    opened = [r.getMessage() for r in caplog.records if "breaker opened" in r.getMessage()]
    assert len(opened) == 1, opened
    assert "refused the compacted requests" in opened[0]


def _refuse_trimmed(body: dict[str, Any]) -> str | None:
    """A validation error for a request the guarantee trimmed (it carries the marker)."""
    if "left out of this request" in json.dumps(body["messages"]):
        return "messages.1: this upstream refuses the trimmed history"
    return None


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_trimmed_requests_refused_go_out_as_the_clients_after_the_first(
    proxy: Proxy, caplog: pytest.LogCaptureFixture, stream: bool
) -> None:
    """A request only trimmed by the guarantee (its summaries fail) that the upstream refuses,
    while it takes the client's own, marks the conversation: its later requests the guarantee
    would trim go out as the client sent them, with no refusal first, and the mark is logged
    once. Each later request was trimmed again, refused and sent a second time."""
    caplog.set_level(logging.INFO, logger="autocompact.serve")
    proxy.app.config = replace(proxy.app.config, context_window=6_000)
    proxy.upstream.window = 24_000  # the client's own requests fit
    proxy.upstream.summary_reply = ""  # every summary fails: requests are only trimmed
    proxy.upstream.refuse = _refuse_trimmed
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
    messages: list[dict[str, Any]] = []
    for turn in range(12):
        messages.append({"role": "user", "content": f"step {turn}: " + filler(turn, 1_800)})
        messages.append({"role": "assistant", "content": f"d{turn}"})
    actions = []
    for turn in range(5):
        messages.append({"role": "user", "content": f"step {12 + turn}: " + filler(turn, 600)})
        if stream:
            with client.chat.completions.with_streaming_response.create(
                model="scripted",
                messages=messages,  # type: ignore[arg-type]
                stream=True,
            ) as response:
                assert b"ok" in response.read()
                actions.append(response.headers["x-autocompact-action"])
        else:
            raw = client.chat.completions.with_raw_response.create(
                model="scripted",
                messages=messages,  # type: ignore[arg-type]
            )
            assert raw.parse().choices[0].message.content.startswith("ok")
            actions.append(raw.headers["x-autocompact-action"])
        messages.append({"role": "assistant", "content": f"ok {turn}"})
    refused = [b for b in _main_bodies(proxy) if _refuse_trimmed(json.loads(b)) is not None]
    assert len(refused) == 1, actions
    assert actions == ["rewrite-rejected", *["trim-refused"] * 4]
    sent = [json.loads(b)["messages"] for b in _main_bodies(proxy)]
    assert sent[-1] == messages[:-1]  # the client's own, whole
    marked = [r.getMessage() for r in caplog.records if "trimmed requests" in r.getMessage()]
    assert len(marked) == 1, marked
