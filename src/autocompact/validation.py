"""Checks of what a library caller hands the engine, with errors that name the argument. Pure.

The session classes call these at their doors (the constructor and ``send``) so that a wrong
type or a malformed conversation fails at once with a :class:`ConfigError` or
:class:`ContentError`, never later as a raw ``TypeError`` or as a request the provider rejects.

Tool pairs: every function call must be answered by a function response with its id, and every
response must answer a call made before it. The one legitimate exception is the newest model
message of a history: its calls are *pending* (the caller runs the tools and sends the results
with the next message), so :func:`check_history` accepts them and :func:`check_outgoing` then
requires the next message to answer every one of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn, get_args

from autocompact.content import CharStats, FunctionResponsePart, Message, Part, TextPart
from autocompact.errors import ConfigError, ContentError
from autocompact.jsonsafe import is_array
from autocompact.thresholds import parse_window

__all__ = [
    "check_count",
    "check_driver_options",
    "check_flag",
    "check_history",
    "check_hooks",
    "check_optional_str",
    "check_outgoing",
    "check_share",
    "check_tool_pairs",
    "check_user_turn",
    "explain_bad_items",
    "message_list",
    "scan_history",
]


def check_count(value: object, name: str, *, positive: bool = False, optional: bool = False) -> Any:
    """A whole number of tokens or failures (``None`` too when ``optional``).

    Raises:
        ConfigError: not an int (a bool, a str, ``None``), or below 0 (below 1 if ``positive``).
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(
            f"{name} must be a whole number, got {type(value).__name__} {value!r:.60}", key=name
        )
    low = 1 if positive else 0
    if value < low:
        raise ConfigError(f"{name} must be {low} or more, got {value}", key=name)
    return value


def check_flag(value: object, name: str) -> bool:
    """``value`` if it is a bool (a str such as ``"no"`` would read as true).

    Raises:
        ConfigError: anything else, naming ``name``.
    """
    if not isinstance(value, bool):
        raise ConfigError(
            f"{name} must be True or False, got {type(value).__name__} {value!r:.60}", key=name
        )
    return value


def check_share(value: object, name: str) -> Any:
    """A share from 0 up to, not including, 1 (an int or a float; not a bool, not NaN).

    Raises:
        ConfigError: anything else; the message names ``name``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        raise ConfigError(
            f"{name} must be a number from 0 up to (not including) 1, got "
            f"{type(value).__name__} {value!r:.60}",
            key=name,
        )
    return value


def check_optional_str(value: object, name: str) -> str | None:
    """A string or ``None``.

    Raises:
        ConfigError: anything else.
    """
    if value is not None and not isinstance(value, str):
        raise ConfigError(
            f"{name} must be a str or None, got {type(value).__name__} {value!r:.60}", key=name
        )
    return value


def check_driver_options(
    *,
    context_window: object,
    clear_tool_outputs: object,
    image_token_estimate: object,
    hooks: object,
) -> tuple[int | None, tuple[Any, ...]]:
    """The options a framework integration passes to its engines, checked where they are given
    (as ``ChatSession`` checks them), not at the first request: the window (``None``: learned
    from the model later) and the hooks, as a tuple.

    Raises:
        ConfigError: the first bad option, in the words ``ChatSession`` uses.
    """
    window = None
    if context_window is not None:
        window = parse_window(context_window, name="context_window", minimum=1)
    check_flag(clear_tool_outputs, "clear_tool_outputs")
    check_count(image_token_estimate, "image_token_estimate")
    return window, check_hooks(hooks)


def check_hooks(hooks: object, name: str = "hooks") -> tuple[Any, ...]:
    """A sequence of callables, as a tuple.

    Raises:
        ConfigError: one callable not in a list, ``None``, or an item that is not callable
            (it failed with a raw ``TypeError``, or was logged as a failing hook at every event).
    """
    if callable(hooks) or not is_array(hooks):
        hint = f" (one hook: {name}=[hook])" if callable(hooks) else ""
        raise ConfigError(
            f"{name} must be a sequence of callables{hint}, got {type(hooks).__name__} "
            f"{hooks!r:.60}",
            key=name,
        )
    checked = tuple(hooks)
    for index, hook in enumerate(checked):
        if not callable(hook):
            raise ConfigError(
                f"{name}[{index}] must be a callable that takes an event, got "
                f"{type(hook).__name__} {hook!r:.60}",
                key=name,
            )
    return checked


def scan_history(history: object, *, name: str = "history") -> tuple[list[Message], CharStats]:
    """Check a history and sum its character statistics, visiting each message once.

    The checks of :func:`check_history` (messages only, well-formed tool pairs, pending calls of
    a final model message allowed) plus the one compaction needs (the history does not start
    with a function response), fused with the statistics sum the session keeps: a restored
    1M-token session is validated and measured in one pass (issue 11).

    Returns:
        The messages as a new list, and the sum of their statistics.

    Raises:
        ContentError: not a sequence of :class:`Message` (a str, dicts), the first message is
            a function response, or a tool call is never answered / a tool result answers no
            call (names the index and the id).
    """
    items = message_list(history, name)
    text = json_chars = media = 0
    open_calls: dict[str, int] = {}
    # This loop is the restore's cost (issue 11, measured with cProfile): it reads the cached
    # statistics slot rather than the property, and a part's ``kind`` rather than isinstance
    # (a failed isinstance and a property call each cost several attribute reads).
    for index, message in enumerate(items):
        if type(message) is not Message and not isinstance(message, Message):
            _not_a_message(name, index, message)
        stats = message._stats
        if stats is None or isinstance(stats, tuple):
            stats = message.stats
        text += stats.text_chars
        json_chars += stats.json_chars
        media += stats.media_parts
        parts = message.parts
        if len(parts) == 1:  # the common case (a coding agent's turns): no list to build
            part = parts[0]
            if part.kind == "function_response":
                if open_calls.pop(part.id, None) is None:
                    _orphaned(name, index, part)
            elif part.kind == "function_call":
                open_calls[part.id] = index
        else:
            _pair_parts(name, index, parts, open_calls)
    _dangling(name, items, open_calls)
    return items, CharStats(text_chars=text, json_chars=json_chars, media_parts=media)


def check_history(
    history: object, *, name: str = "history", tool_pairs: bool = True
) -> tuple[Message, ...]:
    """A history as a tuple of messages with well-formed tool pairs (pending calls allowed).

    Raises:
        ContentError: not a sequence of :class:`Message` (a str, dicts), or a tool call is
            never answered / a tool result answers no call (names the index and the id).
    """
    if tool_pairs:
        return tuple(scan_history(history, name=name)[0])
    items = message_list(history, name)
    for index, message in enumerate(items):
        if not isinstance(message, Message):
            _not_a_message(name, index, message)
    return tuple(items)


def check_tool_pairs(history: Sequence[Message], *, name: str = "history") -> None:
    """Every call answered and every response answering an earlier call.

    The calls of a final model message are pending and allowed.

    Raises:
        ContentError: an orphaned tool result or a dangling tool call (index and id named).
    """
    open_calls: dict[str, int] = {}
    for index, message in enumerate(history):
        _pair_parts(name, index, message.parts, open_calls)
    _dangling(name, history, open_calls)


def _pair_parts(name: str, index: int, parts: Sequence[Part], open_calls: dict[str, int]) -> None:
    """Match one message's parts against the open calls: responses first, then its calls.

    One pass over the parts (not the function_calls / function_responses properties, which
    build two tuples per message): this runs on every restore.
    """
    calls: list[str] = []
    for part in parts:
        if part.kind == "function_response":
            if open_calls.pop(part.id, None) is None:
                _orphaned(name, index, part)
        elif part.kind == "function_call":
            calls.append(part.id)
    for call_id in calls:
        open_calls[call_id] = index


def explain_bad_items(
    items: object, name: str, error: BaseException, *, parts: bool = False
) -> NoReturn:
    """Raise the :class:`ContentError` naming what in ``items`` is no :class:`Message` (nor a
    part, when ``parts``), or ``error`` once more when every item is one. For the function
    API's readers, which do not check what they are given first (a walk over every message):
    they call this when reading it failed with an ``AttributeError`` or ``TypeError``."""
    try:
        listed = message_list(items, name)
    except ContentError as exc:
        raise exc from error
    allowed: tuple[type, ...] = (Message, *get_args(Part)) if parts else (Message,)
    for index, item in enumerate(listed):
        if not isinstance(item, allowed):
            raise ContentError(
                f"{name}[{index}] must be a Message{' or a part' if parts else ''}, got "
                f"{type(item).__name__}: build it with Message.user(...) / Message.model(...), "
                "or read dicts with autocompact.codec.history_from_dicts",
                index=index,
            ) from error
    raise error


def message_list(history: object, name: str) -> list[Any]:
    """``history`` as a list, when it is a sequence (a str, a mapping, ``None`` is not: a
    :class:`ContentError` naming ``name``); its items are not checked."""
    if not is_array(history):
        raise ContentError(
            f"{name} must be a sequence of Message objects, got {type(history).__name__}: "
            "build messages with Message.user(...) / Message.model(...), or read dicts with "
            "autocompact.codec.history_from_dicts"
        )
    return list(history)


def _not_a_message(name: str, index: int, value: object) -> NoReturn:
    raise ContentError(
        f"{name}[{index}] must be a Message, got {type(value).__name__}: build it with "
        "Message.user(...) / Message.model(...), or read dicts with "
        "autocompact.codec.history_from_dicts",
        index=index,
    )


def _orphaned(name: str, index: int, part: FunctionResponsePart) -> NoReturn:
    if index == 0:
        raise ContentError(
            f"{name}[0] holds a tool result (id {part.id!r}, {part.name!r}) that answers no "
            "earlier tool call: the history starts with a function response whose call is "
            "missing; start the history with a user message, or include the model message "
            "with the call",
            index=0,
        )
    raise ContentError(
        f"{name}[{index}] holds a tool result (id {part.id!r}, {part.name!r}) that answers no "
        "earlier tool call: every provider rejects it; include the model message with the call "
        "or drop the result",
        index=index,
    )


def _dangling(name: str, history: Sequence[Message], open_calls: dict[str, int]) -> None:
    last = len(history) - 1
    for call_id, index in open_calls.items():
        if index == last and history[last].role == "model":
            continue  # pending: the caller sends the results with the next message
        raise ContentError(
            f"{name}[{index}] holds a tool call (id {call_id!r}) that is never answered: every "
            "provider rejects it; add a user message with its FunctionResponsePart right after "
            "it",
            index=index,
        )


def check_outgoing(history: Sequence[Message], message: Message, *, name: str = "message") -> None:
    """The next message answers exactly the calls the history's last model message left pending.

    Raises:
        ContentError: it answers a call that was not made, or leaves a pending call unanswered.
    """
    pending: dict[str, str] = {}
    if history and history[-1].role == "model":
        pending = {call.id: call.name for call in history[-1].function_calls}
    for response in message.function_responses:
        if pending.pop(response.id, None) is None:
            raise ContentError(
                f"{name} holds a tool result (id {response.id!r}, {response.name!r}) that "
                "answers no pending tool call of the last model message"
            )
    if pending:
        listed = ", ".join(f"{call_id!r} ({tool})" for call_id, tool in pending.items())
        raise ContentError(
            f"{name} does not answer the tool calls the model made in its last reply: {listed}; "
            "send a FunctionResponsePart for each with the next message"
        )


def check_user_turn(message: Message, caller: str) -> None:
    """A message a chat session sends as the user's turn: the user's role, and something in it.

    Raises:
        ContentError: a model message (the model's turns come back from the provider), or one
            with no part but blank text (a provider refuses an empty turn, or answers nothing).
    """
    if message.role != "user":
        raise ContentError(
            f"{caller} sends the user's turn, got a message with role {message.role!r}: pass a "
            "str or a user Message (the model's messages come back from the provider; to start "
            "from an earlier conversation, pass it as history=)"
        )
    if all(isinstance(part, TextPart) and not part.text.strip() for part in message.parts):
        raise ContentError(
            f"{caller} got an empty message: send text, an image, a document or tool results"
        )
