"""The engine's configuration: one frozen object for what does not change between sends.

:class:`EngineConfig` replaces the two dozen keyword arguments the session core took: the
window, what every request carries besides the messages (system prompt, tool declarations),
the output cap, and the compaction's knobs (keep share, summary target, clearing, image
estimate). It validates itself once, and derives the thresholds and the fixed part's size
(measured once, in one serialization — issue 11). A server that states a smaller window in an
overflow error gives a new config (:meth:`EngineConfig.with_window`), never a mutated one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from autocompact.compaction.split import COMPRESSION_PRESERVE_THRESHOLD
from autocompact.content import CharStats
from autocompact.errors import ConfigError
from autocompact.estimation import (
    BYTES_PER_TOKEN_JSON,
    estimate_stats_tokens,
    estimate_text_tokens,
    tools_json_chars,
)
from autocompact.jsonsafe import is_array
from autocompact.providers.base import ToolSpec
from autocompact.thresholds import (
    DEFAULT_IMAGE_TOKEN_ESTIMATE,
    CompactionThresholds,
    compute_thresholds,
    parse_window,
)
from autocompact.validation import check_count, check_flag, check_optional_str, check_share

__all__ = ["EngineConfig", "check_config", "check_tools"]


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    """What the engine needs to know about the model and the compaction (frozen).

    Attributes:
        context_window: the model's context window in tokens (``128k`` style strings are
            accepted and normalized to an int).
        system_instruction: the system prompt every request carries.
        tools: the tool declarations every request carries.
        image_token_estimate: tokens per image or document.
        max_output_tokens: the output cap of chat turns (``None``: the provider's default).
        clear_tool_outputs: clear old tool output (no model call) before summarizing on
            automatic triggers.
        keep_share: the share of the history a compaction keeps verbatim (0: summary only).
        summary_target_tokens: the summary's target size (``None``: the summarizer's default).

    Raises:
        ConfigError: a value is out of range; the message names the argument.
    """

    context_window: int
    system_instruction: str | None = None
    tools: Sequence[ToolSpec] = ()
    image_token_estimate: int = DEFAULT_IMAGE_TOKEN_ESTIMATE
    max_output_tokens: int | None = None
    clear_tool_outputs: bool = True
    keep_share: float = COMPRESSION_PRESERVE_THRESHOLD
    summary_target_tokens: int | None = None
    thresholds: CompactionThresholds = field(init=False, repr=False, compare=False)
    """The ladder for ``context_window`` (derived)."""
    fixed_stats: CharStats = field(init=False, repr=False, compare=False)
    """The character statistics of the system prompt and tool declarations (derived)."""
    fixed_plain: int = field(init=False, repr=False, compare=False)
    """Their plain token estimate, summed as one (derived)."""
    fixed_tokens: int = field(init=False, repr=False, compare=False)
    """The same, rounded part by part as ``estimate_prompt_tokens`` rounds (derived)."""

    def __post_init__(self) -> None:
        window = parse_window(self.context_window, name="context_window", minimum=1)
        check_optional_str(self.system_instruction, "system_instruction")
        check_count(self.image_token_estimate, "image_token_estimate")
        check_count(self.max_output_tokens, "max_output_tokens", positive=True, optional=True)
        check_share(self.keep_share, "keep_share")
        check_flag(self.clear_tool_outputs, "clear_tool_outputs")
        check_count(
            self.summary_target_tokens, "summary_target_tokens", positive=True, optional=True
        )
        tools = check_tools(self.tools)
        tools_chars = tools_json_chars(tools)
        fixed_stats = CharStats(
            text_chars=len(self.system_instruction or ""), json_chars=tools_chars
        )
        derived = {
            "context_window": window,
            "tools": tools,
            "thresholds": compute_thresholds(window),
            "fixed_stats": fixed_stats,
            "fixed_plain": estimate_stats_tokens(fixed_stats, self.image_token_estimate),
            "fixed_tokens": estimate_text_tokens(self.system_instruction)
            + math.ceil(tools_chars / BYTES_PER_TOKEN_JSON),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    def with_window(self, context_window: int) -> EngineConfig:
        """The same configuration for another window (a window learned from the server)."""
        return replace(self, context_window=context_window)


def check_config(config: object) -> EngineConfig:
    """``config`` if it is an :class:`EngineConfig`.

    Raises:
        ConfigError: anything else (a dict of its fields), naming ``config``.
    """
    if not isinstance(config, EngineConfig):
        raise ConfigError(
            f"config must be an EngineConfig(...), got {type(config).__name__} {config!r:.60}",
            key="config",
        )
    return config


def check_tools(tools: object, *, json_declarations: bool = True) -> tuple[ToolSpec, ...]:
    """The tool declarations as a tuple; a value that holds no declarations (``None``, a str, a
    single dict) or an item that is none (a bare name) is a ConfigError naming it (it failed
    with a raw TypeError, or was read as a list of names and failed inside the first send).
    ``json_declarations``: a JSON declaration (a mapping) counts as one (a guard measures it; a
    session sends to an adapter, which reads a ToolSpec's fields)."""
    if isinstance(tools, ToolSpec) or not is_array(tools):
        raise ConfigError(
            f"tools must be a sequence of ToolSpec objects, got {type(tools).__name__} "
            f"{tools!r:.60}",
            key="tools",
        )
    checked = tuple(tools)
    allowed = (ToolSpec, Mapping) if json_declarations else (ToolSpec,)
    for index, tool in enumerate(checked):
        if not isinstance(tool, allowed):
            raise ConfigError(
                f"tools[{index}] must be a ToolSpec, got {type(tool).__name__} {tool!r:.60}: "
                "declare it as ToolSpec(name=..., description=..., parameters={...})",
                key="tools",
            )
    return checked
