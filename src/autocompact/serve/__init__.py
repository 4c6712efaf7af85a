"""``autocompact serve``: a compaction proxy for agents you did not write (``autocompact[serve]``).

An ASGI app between an agent and its model server that speaks OpenAI Chat Completions, OpenAI
Responses (stateless) and Anthropic Messages: below *auto* it forwards bytes unchanged; the first
request of a conversation to reach *auto* is compacted with the engine
(:class:`~autocompact.guard.ContextGuard`) and the result stored as *this prefix → these
replacement messages*; every later request carrying that prefix gets the same bytes in its
place. See ``docs/serve.md``.

Modules: :mod:`.app` (routes, forwarding), :mod:`.config` (:class:`ServeConfig`),
:mod:`.planner` (the engine's decision and the store), :mod:`.fastpath` (a request with nothing
to do, read from its JSON), :mod:`.shared` (the carried state every worker shares),
:mod:`.identity`, :mod:`.substitution`, :mod:`.wire`, :mod:`.upstream`, :mod:`.failures` (what
the client is told when the upstream fails), :mod:`.request_log` (what follows a request: the
learning, its log line, its headers), :mod:`.stopping` (ending the open requests when the proxy
stops), :mod:`.windows` (the window per model), :mod:`.threaded` (the app in a thread, for
tests and embedding), and one module per wire protocol (:mod:`.openai_chat`,
:mod:`.anthropic_messages`, :mod:`.responses`).
"""

from __future__ import annotations

from autocompact.serve.app import ServeApp, ServeConfig, create_app

__all__ = ["ServeApp", "ServeConfig", "create_app"]
