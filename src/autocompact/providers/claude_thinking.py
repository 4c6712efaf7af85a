"""How each Claude model takes thinking: what turns it off (or as far down as it goes) for the
summary side query, and what turns it on. Pure: read from the model's name.

=====================================  =============================================  =========
family                                 ``thinking=False`` (the side query)            cap raised
=====================================  =============================================  =========
up to 4.5 (Haiku 4.5, Sonnet 4.5, …)   ``{"type": "disabled"}``                       0
Opus 4.6, Sonnet 4.6                   ``{"type": "disabled"}``                       0
Opus 4.7, 4.8                          no ``thinking`` field (they do not think       0
                                       unless asked; ``disabled`` is refused)
Opus 5, Sonnet 5, Haiku 5.5            ``{"type": "disabled"}`` (they think when the  0
                                       field is left out)
Sonnet 5.5                             ``{"type": "between_tools"}`` (``disabled`` is 0
                                       refused with a 400 that names it)
Fable, Mythos, Opus 5.5, and any       no ``thinking`` field and ``output_config:     8,192
later family not listed                {"effort": "low"}``: thinking cannot be        (allowance)
                                       turned off (``disabled`` and ``between_tools``
                                       are refused with a 400)
=====================================  =============================================  =========

With thinking on, models up to 4.5 get ``{"type": "enabled", "budget_tokens": …}``; Opus and
Sonnet 4.6 ``{"type": "adaptive"}`` (budgets are deprecated there); from Opus 4.7 on, and the
5 family, ``{"type": "adaptive", "display": "summarized"}`` (a budget is refused, and their
default display leaves the thinking text out).

The allowance is not a hard budget (an effort is not one): a reply that still reaches the cap
ends with ``max_tokens`` and the engine refuses it as truncated. Sources: the Anthropic SDK's
own model notes, pydantic-ai's Anthropic profiles (verified live by its maintainers), Amazon
Bedrock's model guide; no request to the real API was made from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["ALWAYS_THINKS_ALLOWANCE", "ClaudeThinking", "claude_thinking"]

ALWAYS_THINKS_ALLOWANCE = 8192
"""Tokens added to the side query's cap on a model that cannot turn thinking off."""

_DISABLED: dict[str, Any] = {"type": "disabled"}
_ADAPTIVE: dict[str, Any] = {"type": "adaptive"}
_SUMMARIZED: dict[str, Any] = {"type": "adaptive", "display": "summarized"}
_VERSION = re.compile(r"claude-(?:[a-z]+-)?(\d+)(?:[-.](\d)(?!\d))?")


@dataclass(frozen=True, kw_only=True)
class ClaudeThinking:
    """What a Claude model is sent for thinking.

    Attributes:
        off: the ``thinking`` field for ``thinking=False`` (``None``: left out).
        off_effort: also send ``output_config: {"effort": "low"}`` with ``thinking=False``.
        cap_extra: tokens added to the cap with ``thinking=False``.
        on: the ``thinking`` field for ``thinking=True`` (``None``: ``enabled`` with a budget).
    """

    off: dict[str, Any] | None = None
    off_effort: bool = False
    cap_extra: int = 0
    on: dict[str, Any] | None = None

    @property
    def always_thinks(self) -> bool:
        """Whether thinking cannot be turned off (the lowest effort and an allowance instead)."""
        return self.cap_extra > 0


_BUDGET = ClaudeThinking(off=_DISABLED)
_ALWAYS = ClaudeThinking(off_effort=True, cap_extra=ALWAYS_THINKS_ALLOWANCE, on=_SUMMARIZED)


def claude_thinking(model: str) -> ClaudeThinking:
    """What ``model`` is sent for thinking (see the module's table)."""
    name = model.strip().lower()
    start = name.find("claude-")
    if start < 0:
        return _BUDGET
    name = name[start:]  # without a provider prefix ("anthropic/", "us.anthropic.")
    if name.startswith(("claude-fable-", "claude-mythos-", "claude-opus-5-5")):
        return _ALWAYS
    if name.startswith("claude-sonnet-5-5"):
        return ClaudeThinking(off={"type": "between_tools"}, on=_SUMMARIZED)
    if name.startswith(("claude-opus-5", "claude-sonnet-5", "claude-haiku-5-5")):
        return ClaudeThinking(off=_DISABLED, on=_SUMMARIZED)
    if name.startswith(("claude-opus-4-7", "claude-opus-4-8")):
        return ClaudeThinking(off=None, on=_SUMMARIZED)
    if name.startswith(("claude-opus-4-6", "claude-sonnet-4-6")):
        return ClaudeThinking(off=_DISABLED, on=_ADAPTIVE)
    found = _VERSION.match(name)
    if found is not None and (int(found.group(1)), int(found.group(2) or 0)) >= (4, 9):
        return _ALWAYS  # a family this table does not know yet: nothing it may refuse
    return _BUDGET
