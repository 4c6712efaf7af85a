"""autocompact for LangChain v1 agents (``pip install "autocompact[langchain]"``).

``AutocompactMiddleware`` runs the engine's ladder inside ``langchain.agents.create_agent``::

    from autocompact.integrations.langchain import AutocompactMiddleware

    agent = create_agent(model, tools, middleware=[AutocompactMiddleware(context_window=128_000)])

This package imports ``langchain`` and ``langgraph``; ``import autocompact`` never does. Without
them, importing it raises :class:`autocompact.errors.MissingDependencyError` with the install hint.
"""

from __future__ import annotations

from autocompact.errors import MissingDependencyError

try:
    import langchain.agents  # noqa: F401
    import langgraph.graph  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised where langchain is absent
    missing = "langgraph" if "langgraph" in str(exc) else "langchain"
    raise MissingDependencyError(missing, "langchain") from exc

from autocompact.integrations.langchain._convert import (
    completion_usage,
    from_autocompact,
    to_autocompact,
)
from autocompact.integrations.langchain._middleware import (
    AutocompactMiddleware,
    AutocompactState,
    SummarizerChoice,
)
from autocompact.integrations.langchain._provider import LangChainProvider, bounded_model

__all__ = [
    "AutocompactMiddleware",
    "AutocompactState",
    "LangChainProvider",
    "SummarizerChoice",
    "bounded_model",
    "completion_usage",
    "from_autocompact",
    "to_autocompact",
]
