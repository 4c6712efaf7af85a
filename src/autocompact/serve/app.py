"""The proxy as an ASGI app (Starlette): routes, forwarding, streaming, errors, the log line.

``create_app(ServeConfig(...))`` gives the app; ``autocompact serve`` runs it under uvicorn.
Each chat request is planned by :class:`~autocompact.serve.planner.Planner` (forward, substitute,
compact, trim), sent to the upstream with the client's own headers, and its response or SSE
stream passed back byte for byte, with ``X-Autocompact-Tier``, ``X-Autocompact-Compacted`` and
``X-Autocompact-Action`` added. A compaction is stored only after the upstream accepted the
request (a stream: after it ended well). A request the upstream rejects goes out once more at
most (:mod:`autocompact.serve.rejections`: smaller after "too long", the client's own bytes
after a rewrite was refused), before anything reaches the client. Every failure reaches the
client as the upstream's own error or one in the protocol's error shape; one log line per
request says what was done.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route

from autocompact.errors import AutocompactError, ContentError, described
from autocompact.jsonsafe import loads
from autocompact.serve.anthropic_messages import ANTHROPIC_MESSAGES
from autocompact.serve.config import (
    DEFAULT_MAX_BODY_BYTES,
    LEASE_MARGIN,
    ServeConfig,
    target_url,
)
from autocompact.serve.decision import Decision
from autocompact.serve.failures import CONNECT_SECONDS, stream_broke, upstream_failed
from autocompact.serve.followed import Followed, FollowedStream
from autocompact.serve.openai_chat import OPENAI_CHAT
from autocompact.serve.planner import Planner
from autocompact.serve.protocol import (
    WireProtocol,
    looks_like_overflow,
)
from autocompact.serve.rejections import (
    FALLBACK_STATUSES,
    REACTIVE_ACTIONS,
    REWRITE_REJECTED,
    client_bytes,
    reads_rejection,
    retry_too_long,
)
from autocompact.serve.request_log import followed_by, log_request, ours
from autocompact.serve.responses import RESPONSES, text_input_as_item
from autocompact.serve.stopping import STOPPED, Stopped, Stopper
from autocompact.serve.upstream import (
    UpstreamProvider,
    decodes,
    forward_headers,
    header_bytes,
    is_event_stream,
    read_body,
    response_headers,
)
from autocompact.serve.windows import ModelWindows
from autocompact.sessions.stores import open_store
from autocompact.sessions.stores.base import SessionStore

__all__ = ["DEFAULT_MAX_BODY_BYTES", "LEASE_MARGIN", "ServeApp", "ServeConfig", "create_app"]

logger = logging.getLogger("autocompact.serve")

_USAGE_WINDOW = 16 * 1024


class ServeApp:
    """The proxy's state and its ASGI app (``.asgi``).

    Args:
        config: how it runs.
        store: a store to use instead of opening ``config.store``.
        transport: the HTTP transport to the upstreams (tests pass one).
        clock: a monotonic clock.
    """

    def __init__(
        self,
        config: ServeConfig,
        *,
        store: SessionStore | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.config = config
        self.store = store if store is not None else open_store(config.store)
        self.planner = Planner(
            self.store,
            owner=config.owner,
            lease_wait=config.lease_wait,
            lease_seconds=config.lease_length,
            keep_share=config.keep_share,
            summary_target_tokens=config.summary_target_tokens,
        )
        self.transport = transport
        self.clock = clock
        self.stopper = Stopper()
        self._client: httpx.AsyncClient | None = None
        self.windows = ModelWindows(config.upstreams, clock=clock)
        routes = [
            Route("/healthz", self.healthz, methods=["GET"]),
            Route("/", self.root, methods=["GET", "HEAD"]),
            Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
            Route("/v1/messages", self.messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self.count_tokens, methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/models/{model:path}", self.models, methods=["GET"]),
            Route("/v1/responses", self.responses, methods=["POST"]),
            Route("/v1/responses/{rest:path}", self.responses, methods=["GET", "POST", "DELETE"]),
        ]
        self._routes = routes
        self.asgi = Starlette(routes=routes)
        everything = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
        self.asgi.add_route("/{path:path}", self.unknown, methods=everything)

    @property
    def client(self) -> httpx.AsyncClient:
        """The HTTP client to the upstreams (made on first use)."""
        if self._client is None:
            timeout = httpx.Timeout(self.config.timeout, connect=CONNECT_SECONDS)
            self._client = httpx.AsyncClient(transport=self.transport, timeout=timeout)
        return self._client

    def stop(self) -> None:
        """End every open request now: one that waits for its answer gets a 503, a stream the
        protocol's error event, each saying that the proxy stopped (``autocompact serve`` does
        when told to stop, once they had a few seconds to end). Call it in the app's loop."""
        self.stopper.stop()

    async def aclose(self) -> None:
        """Close the HTTP client and the store."""
        if self._client is not None:
            await self._client.aclose()
        self.store.close()

    # -- routes ----------------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        """200 when the store answers, 503 otherwise."""
        try:
            await anyio.to_thread.run_sync(self.store.exists, "serve:healthz")
        except Exception as exc:
            return JSONResponse({"status": "unavailable", "error": str(exc)}, status_code=503)
        return JSONResponse({"status": "ok", "upstreams": sorted(self.config.upstreams)})

    async def root(self, request: Request) -> Response:
        """200: Claude Code sends ``HEAD /`` to its base URL before its first request."""
        logger.info("%s / status=200", request.method)
        return JSONResponse({"service": "autocompact serve", "health": "/healthz"})

    async def chat_completions(self, request: Request) -> Response:
        """OpenAI Chat Completions."""
        return await self._guarded(request, OPENAI_CHAT, self._chat)

    async def messages(self, request: Request) -> Response:
        """Anthropic Messages."""
        return await self._guarded(request, ANTHROPIC_MESSAGES, self._chat)

    async def count_tokens(self, request: Request) -> Response:
        """Anthropic's token count, forwarded."""
        return await self._guarded(request, ANTHROPIC_MESSAGES, self._passthrough)

    async def models(self, request: Request) -> Response:
        """The model list, forwarded (to Anthropic when the client speaks Anthropic): a client
        that says it speaks Anthropic (``anthropic-version``) gets the Anthropic upstream's or,
        when none is configured, the 404 ``/v1/messages`` gives it, not the other's list."""
        anthropic = "anthropic-version" in request.headers or "x-api-key" in request.headers
        protocol = ANTHROPIC_MESSAGES if anthropic else OPENAI_CHAT
        if protocol.upstream not in self.config.upstreams:
            if "anthropic-version" in request.headers:
                return self._no_upstream(request, protocol)
            protocol = OPENAI_CHAT if anthropic else ANTHROPIC_MESSAGES
        return await self._guarded(request, protocol, self._passthrough)

    async def responses(self, request: Request) -> Response:
        """OpenAI Responses: a stateless request (the whole ``input``) is planned like a chat;
        one with ``previous_response_id``, and every other Responses endpoint, is forwarded."""
        if request.method != "POST" or request.url.path != "/v1/responses":
            return await self._guarded(request, RESPONSES, self._passthrough)
        raw = await request.body()
        stateful = False
        if b'"previous_response_id"' in raw or b"\\u" in raw:  # decoded only when it may say
            try:
                stateful = bool(loads(raw).get("previous_response_id"))
            except (ValueError, AttributeError):
                stateful = False  # the chat path answers with the protocol's error
        handler = self._passthrough if stateful else self._chat
        return await self._guarded(request, RESPONSES, handler)

    async def unknown(self, request: Request) -> Response:
        """An endpoint the proxy does not serve: a 404, or a 405 naming the methods it serves
        for a path it serves (with ``Allow``), in the error shape of the path's protocol."""
        protocol: Any = ANTHROPIC_MESSAGES if "/messages" in request.url.path else OPENAI_CHAT
        allowed = sorted(
            {
                method
                for route in self._routes
                if route.matches(request.scope)[0] is Match.PARTIAL
                for method in route.methods or ()
            }
        )
        if allowed:
            message = (
                f"autocompact serve answers {', '.join(allowed)} {request.url.path}, not "
                f"{request.method}"
            )
            logger.warning("%s %s method not allowed status=405", request.method, request.url.path)
            response = self._error(protocol, 405, "invalid_request_error", message)
            response.headers["allow"] = ", ".join(allowed)
            return response
        message = (
            f"autocompact serve has no endpoint {request.method} {request.url.path}; it serves "
            "/v1/chat/completions, /v1/responses, /v1/messages, /v1/messages/count_tokens, "
            "/v1/models and /healthz"
        )
        # Logged like every request, so a client calling an endpoint the proxy lacks is seen.
        logger.warning("%s %s unknown endpoint status=404", request.method, request.url.path)
        return self._error(protocol, 404, "not_found_error", message)

    # -- helpers -------------------------------------------------------------------------------

    def _error(self, protocol: Any, status: int, kind: str, message: str) -> Response:
        return JSONResponse(
            protocol.error(status, kind, message),
            status_code=status,
            headers={"x-autocompact-action": "error"},
        )

    async def _guarded(
        self,
        request: Request,
        protocol: Any,
        handler: Callable[[Request, Any], Any],
    ) -> Response:
        try:
            with self.stopper.ending():
                response: Response = await handler(request, protocol)
            return response
        except Stopped:
            return self._failed(request, protocol, 503, "api_error", STOPPED)
        except Exception as exc:
            logger.exception("autocompact serve failed on %s", request.url.path)
            message = f"autocompact serve failed: {described(exc)}"
            return self._error(protocol, 500, "api_error", message)

    def _failed(
        self,
        request: Request,
        protocol: Any,
        status: int,
        kind: str,
        message: str,
        decision: Decision | None = None,
        added: float = 0.0,
    ) -> Response:
        """An error the proxy answers itself, logged like every request (with its reason)."""
        decision = replace(decision or Decision(body=b"", action="error"), action="error")
        log_request(self.planner, request, decision, status, added, error=message)
        return self._error(protocol, status, kind, message)

    def _too_large(self, request: Request, protocol: Any, size: int) -> Response:
        message = (
            f"the request body is {size:,} bytes, over the proxy's limit of "
            f"{self.config.max_body_bytes:,} (start autocompact serve with a larger "
            "--max-body-bytes)"
        )
        return self._failed(request, protocol, 413, "request_too_large", message)

    async def _send(
        self,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]],
        body: bytes,
        decision: Decision | None = None,
    ) -> Any:
        """Send ``body``; the ``decision``'s lease is given back when no answer comes."""
        request = self.client.build_request(
            method, url, headers=header_bytes(headers), content=body
        )
        try:
            return await self.client.send(request, stream=True)
        except BaseException:  # (the upstream's failure, or the proxy's stop)
            if decision is not None:
                await self._give_back(decision)
            raise

    async def _give_back(self, decision: Decision) -> None:
        """Give the decision's lease back, also in a request the stop ends (shielded)."""
        with anyio.CancelScope(shield=True):
            await self.planner.release(decision)

    def _send_error(
        self,
        request: Request,
        protocol: Any,
        url: str,
        exc: httpx.HTTPError,
        decision: Decision | None = None,
        added: float = 0.0,
        *,
        answered: bool = False,
    ) -> Response:
        """The error for a send that failed (``answered``: while reading the answer's body)."""
        failed = upstream_failed(
            protocol.upstream, url, exc, timeout=self.config.timeout, answered=answered
        )
        return self._failed(
            request, protocol, failed.status, failed.kind, failed.message, decision, added
        )

    # -- passthrough -----------------------------------------------------------------------------

    async def _passthrough(self, request: Request, protocol: Any) -> Response:
        start = self.clock()
        base = self.config.upstreams.get(protocol.upstream)
        if base is None:
            return self._no_upstream(request, protocol)
        raw = await request.body()
        if len(raw) > self.config.max_body_bytes and not request.url.path.endswith("/compact"):
            return self._too_large(request, protocol, len(raw))
        url = target_url(base, request.url.path, request.url.query)
        headers = forward_headers(request.headers.items())
        decision = Decision(body=raw, action="passthrough")
        try:
            response = await self._send(request.method, url, headers, raw)
        except httpx.HTTPError as exc:
            return self._send_error(request, protocol, url, exc, decision, self.clock() - start)
        return await self._relay(request, protocol, response, decision, start, self.clock())

    def _no_upstream(self, request: Request, protocol: Any) -> Response:
        message = (
            f"no {protocol.upstream} upstream is configured; start autocompact serve with "
            f"--upstream {protocol.upstream}=URL"
        )
        return self._failed(request, protocol, 404, "not_found_error", message)

    # -- chat ------------------------------------------------------------------------------------

    async def _chat(self, request: Request, protocol: WireProtocol) -> Response:
        start = self.clock()
        base = self.config.upstreams.get(protocol.upstream)
        if base is None:
            return self._no_upstream(request, protocol)
        raw = await request.body()
        try:
            body = loads(raw)
        except ValueError as exc:
            message = f"the request body is not JSON ({exc}); send a JSON object"
            return self._failed(request, protocol, 400, "invalid_request_error", message)
        if not isinstance(body, dict):
            message = f"the request body must be a JSON object, not {type(body).__name__}"
            return self._failed(request, protocol, 400, "invalid_request_error", message)
        if protocol is RESPONSES:
            body = text_input_as_item(body)
        messages = body.get(protocol.messages_key)
        if len(raw) > self.config.max_body_bytes and not (
            isinstance(messages, list) and protocol.client_compaction(body, messages)
        ):
            return self._too_large(request, protocol, len(raw))
        url = target_url(base, request.url.path, request.url.query)
        headers = forward_headers(request.headers.items())
        model = str(body.get("model", ""))
        provider = UpstreamProvider(
            protocol=protocol,
            client=self.client,
            url=url,
            headers=headers,
            model=model,
            timeout=self.config.side_query_timeout,
        )
        window = self.windows.stated(protocol.upstream, model) or self.config.context_window
        if window is None:
            window = await self.windows.window(protocol.upstream, model)
        lowered = {k.lower(): v for k, v in request.headers.items()}
        plan: dict[str, Any] = {
            "protocol": protocol,
            "body": body,
            "raw": raw,
            "headers": lowered,
            "window": window,
            "provider": provider,
        }
        decision = await self._plan(plan, raw)
        retried = False  # a rejected request goes out once more at most
        while True:
            sent = self.clock()
            try:
                response = await self._send("POST", url, headers, decision.body, decision)
            except httpx.HTTPError as exc:
                return self._send_error(request, protocol, url, exc, decision, sent - start)
            status = response.status_code
            # The client's own request, sent after its rewrite with a stored substitution or a
            # fresh compaction was refused: taken, or refused only as too long, the rewrite was
            # at fault (the substitution is not used again, the compaction counts as failed).
            fallback = decision.action == REWRITE_REJECTED and decision.refusable
            if fallback and status in FALLBACK_STATUSES:
                pass  # read below: only its error says whether it was too long
            elif retried or not reads_rejection(status, decision, raw):
                if fallback and (status < 400 or looks_like_overflow(status, b"")):
                    await self.planner.refuse(decision, status)
                return await self._relay(request, protocol, response, decision, start, sent)
            try:
                content = await read_body(response)
            except httpx.HTTPError as exc:  # the error body broke off or stalled
                await self.planner.release(decision)
                return self._send_error(
                    request, protocol, url, exc, decision, sent - start, answered=True
                )
            finally:
                await response.aclose()
            again: Decision | None = None
            if fallback:
                if looks_like_overflow(status, content):
                    await self.planner.refuse(decision, status)
            elif looks_like_overflow(status, content):
                if decision.action in REACTIVE_ACTIONS:  # (the others were sized anew)
                    planning = partial(self._plan, raw=raw)
                    again = await retry_too_long(
                        planning, self.planner, self.windows, plan, decision, content
                    )
            elif status in FALLBACK_STATUSES and decision.body != raw:
                # Rejected as the proxy rewrote it: the client's own request, which might
                # have been accepted, goes out once (rewrite_rejected).
                await self.planner.release(decision)
                again = client_bytes(decision, raw, status, content)
            if again is None:  # the upstream's error, to the client
                await self.planner.release(decision)
                log_request(self.planner, request, decision, status, sent - start)
                reply = Response(content, status_code=status)
                reply.raw_headers.extend(response_headers(response.headers, ours(decision)))
                return reply
            decision, retried = again, True

    async def _plan(self, plan: dict[str, Any], raw: bytes) -> Decision:
        """The planner's decision; when it fails (the store is down, a history it cannot
        write), the request goes out as the client sent it."""
        try:
            return await self.planner.plan(**plan)
        except ContentError as exc:  # the client's messages: theirs to mend, not an operator's
            logger.info("forwarding uncompacted a request the proxy cannot read: %s", exc)
            return Decision(body=raw, action="error-forwarded")
        except AutocompactError as exc:
            logger.error("forwarding uncompacted: %s", exc)
            return Decision(body=raw, action="error-forwarded")

    async def _relay(
        self,
        request: Request,
        protocol: Any,
        response: httpx.Response,
        decision: Decision,
        start: float,
        sent: float,
    ) -> Response:
        lines = response_headers(response.headers, ours(decision))
        status = response.status_code
        added = sent - start
        readable = decodes(response.headers)  # else passed back as sent and not read
        if not is_event_stream(response.headers, decision.body):
            try:
                content = await read_body(response)
            except httpx.HTTPError as exc:
                await self.planner.release(decision)
                return self._send_error(
                    request,
                    protocol,
                    str(response.request.url),
                    exc,
                    decision,
                    added,
                    answered=True,
                )
            except BaseException:  # (the proxy's stop)
                await self._give_back(decision)
                raise
            finally:
                await response.aclose()
            if status < 400:
                await self._commit(decision, protocol)
            await self.planner.release(decision)
            usage = content if status < 400 and readable else b""
            marks = [self.planner.following(decision)]
            then = followed_by(
                self.planner, request, decision, status, added, usage, marks, whole=True
            )
            return Followed(content, then, status_code=status, lines=lines)

        streamed = bytearray()  # where the stream reported its usage, once it ended well
        # Marked when the stream ended, not when it started: a request of the conversation made
        # meanwhile (a client's side request under the conversation's id) does not wait.
        learning: list[Callable[[], None]] = []

        async def relay() -> AsyncIterator[bytes]:
            ok = False
            hung_up = False  # the client went away (or the proxy stopped) before the end
            held: bytes | None = None  # (only when the stream cannot be read: see below)
            head, tail = bytearray(), bytearray()  # where a stream reports its usage
            try:
                # Each chunk goes out as it comes. The stream ended well when the upstream closed
                # it or, for a client that hangs up right after the closing event (before the
                # upstream's end is seen here), when its last bytes hold that event; a stream
                # that cannot be read (its coding undecodable here) holds back one chunk instead,
                # so its end is known before its last bytes go out.
                # Decoded: an upstream that compresses although asked not to is passed back
                # plain (its content-encoding is not), unless httpx cannot decode it.
                chunks = aiter(response.aiter_bytes() if readable else response.aiter_raw())
                while True:
                    with self.stopper.ending():  # (the proxy's stop ends the wait)
                        chunk = await anext(chunks, None)
                    if chunk is None:
                        break
                    if len(head) < _USAGE_WINDOW:
                        head.extend(chunk[: _USAGE_WINDOW - len(head)])
                    tail.extend(chunk)
                    del tail[:-_USAGE_WINDOW]
                    if readable:
                        yield chunk
                        continue
                    if held is not None:
                        yield held
                    held = chunk
                ok = True
                if held is not None:
                    yield held
            except httpx.HTTPError as exc:
                url = str(response.request.url)
                why = stream_broke(protocol.upstream, url, exc, timeout=self.config.timeout)
                identity = decision.identity
                conversation = identity.session_id if identity else "-"
                logger.warning("the upstream stream broke: conversation=%s %s", conversation, why)
                if held is not None:
                    yield held
                if not (readable and protocol.stream_ended(bytes(tail))):
                    yield protocol.stream_error(why)
            except Stopped:
                hung_up = True  # (the upstream took the request, as for a client hanging up)
                if held is not None:
                    yield held
                if not (readable and protocol.stream_ended(bytes(tail))):
                    yield protocol.stream_error(STOPPED)
            except BaseException:  # (the upstream's failures are HTTPErrors)
                hung_up = True
                raise
            finally:
                # Shielded: a client that hangs up cancels this generator, and the record must
                # still be stored and the lease given back.
                with anyio.CancelScope(shield=True):
                    await response.aclose()
                    ok = ok or (readable and protocol.stream_ended(bytes(tail)))
                    # The upstream took the request (its status said so): a client that hung
                    # up mid-stream (an agent's user interrupting the reply) sends it again,
                    # or its next turn, with the same prefix, which the record replays. Only
                    # a stream that ended well reported the usage to learn from.
                    if (ok or hung_up) and status < 400:
                        await self._commit(decision, protocol)
                    if ok and status < 400:
                        streamed.extend(tail + head if readable else b"")
                        learning.append(self.planner.following(decision))
                    await self.planner.release(decision)

        then = followed_by(self.planner, request, decision, status, added, streamed, learning)
        return FollowedStream(relay(), then, status_code=status, lines=lines)

    async def _commit(self, decision: Decision, protocol: Any) -> None:
        try:
            await self.planner.commit(decision, protocol.name)
        except AutocompactError as exc:
            logger.error("could not store the compaction: %s", exc)


def create_app(config: ServeConfig, **kwargs: Any) -> Starlette:
    """The proxy's ASGI app (see :class:`ServeApp` for the keyword arguments)."""
    return ServeApp(config, **kwargs).asgi
