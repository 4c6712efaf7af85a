"""The engine: one conversation's state, its configuration and the turn flows (no I/O).

Start here to change *what* autocompact decides before, during or after a send:

- :mod:`autocompact.engine.config`: :class:`EngineConfig`, the frozen configuration (window,
  system prompt and tools, output cap, keep share, summary target, clearing, image estimate);
- :mod:`autocompact.engine.state`: :class:`ConversationState`, the one record a conversation
  carries between sends (history log, last count and what was added since, breaker count and
  hold, calibration, growth log, tier), :class:`CarriedState` (its JSON-able part for drivers
  that keep the history themselves) and :func:`adopt` (a stored conversation becomes the state);
- :mod:`autocompact.engine.sizing`: the pre-send estimate, the provider's scale and the
  guarantee's request (pure functions of the two above);
- :mod:`autocompact.engine.core`: :class:`Engine` and its flows — generators that yield each
  request (a side query or the main turn) and receive the completion.

The drivers answer the flows' requests and keep the state where their world keeps it:
``ChatSession``/``AsyncChatSession`` (:mod:`autocompact.chat`), ``ContextGuard``
(:mod:`autocompact.guard`) and the framework integrations. Nothing here imports them.
"""

from autocompact.engine.config import EngineConfig
from autocompact.engine.core import Engine, TurnFlow
from autocompact.engine.sizing import PlannedRequest
from autocompact.engine.state import CarriedState, ConversationState, adopt

__all__ = [
    "CarriedState",
    "ConversationState",
    "Engine",
    "EngineConfig",
    "PlannedRequest",
    "TurnFlow",
    "adopt",
]
