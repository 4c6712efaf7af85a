"""The session's append-only message log and the read-only views a request carries. Pure.

A send must not cost time in proportion to the history (issue 11): building each request as
``(*history, message)`` and committing the turn as ``(*history, message, reply)`` copied the
whole conversation twice per send. :class:`MessageLog` keeps the messages in a list that only
ever grows — a slot once written is never changed; a rollback or a compaction *replaces* the
list instead of editing it — so a :class:`HistoryView` over its first ``n`` messages (plus the
pending message) stays exactly what it was when it was made, at no copying cost. The immutable
tuple that :attr:`ChatSession.history <autocompact.ChatSession.history>` returns is built only
when someone reads it, and cached until the log changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import overload

from autocompact.content import Message

__all__ = ["HistoryView", "MessageLog"]


class HistoryView(Sequence[Message]):
    """A read-only sequence of messages: the first ``length`` messages of a log, then ``extra``.

    What :attr:`ChatRequest.messages <autocompact.providers.base.ChatRequest.messages>` holds on
    a session's main request. It behaves as a tuple for reading (``len``, indexing, slicing —
    which returns a tuple —, iteration, ``in``, ``==`` with any sequence of messages, ``hash``,
    ``+``) and never changes: the log under it only grows.
    """

    __slots__ = ("_extra", "_items", "_length")

    def __init__(self, items: list[Message], length: int, extra: tuple[Message, ...] = ()):
        self._items = items
        self._length = length
        self._extra = extra

    def __len__(self) -> int:
        return self._length + len(self._extra)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...

    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        if isinstance(index, slice):
            return self.as_tuple()[index]
        size = self._length + len(self._extra)
        position = index + size if index < 0 else index
        if not 0 <= position < size:
            raise IndexError("HistoryView index out of range")
        if position < self._length:
            return self._items[position]
        return self._extra[position - self._length]

    def __iter__(self) -> Iterator[Message]:
        return chain(islice(self._items, self._length), self._extra)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(self.as_tuple())

    def __add__(self, other: Iterable[Message]) -> tuple[Message, ...]:
        return (*self, *other)

    def __radd__(self, other: Iterable[Message]) -> tuple[Message, ...]:
        return (*other, *self)

    def __repr__(self) -> str:
        return f"HistoryView({list(self)!r})"

    def __reduce__(self) -> tuple[type[HistoryView], tuple[list[Message], int]]:
        # Pickle (and deepcopy) what the view shows, not the messages appended after it.
        return (HistoryView, (list(self), len(self)))

    def as_tuple(self) -> tuple[Message, ...]:
        """The messages as a tuple (a copy: O(n))."""
        return (*islice(self._items, self._length), *self._extra)


class MessageLog:
    """An append-only list of messages with a cached tuple snapshot (see the module docstring).

    Every change that is not an append (a rollback, a compaction, a clear) installs a new list,
    so the views handed out earlier keep showing what they showed.
    """

    __slots__ = ("_items", "_snapshot")

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._items: list[Message] = list(messages)
        self._snapshot: tuple[Message, ...] | None = None

    def __len__(self) -> int:
        return len(self._items)

    @property
    def last(self) -> Message | None:
        """The newest message, or None for an empty log."""
        return self._items[-1] if self._items else None

    def snapshot(self) -> tuple[Message, ...]:
        """The messages as a tuple: built on the first read after a change, then cached."""
        snap = self._snapshot
        if snap is None:
            snap = self._snapshot = tuple(self._items)
        return snap

    def view(self, *extra: Message) -> HistoryView:
        """A view of the messages now in the log, followed by ``extra`` (O(1))."""
        return HistoryView(self._items, len(self._items), extra)

    def append(self, *messages: Message) -> None:
        """Add messages at the end (amortized O(1) each)."""
        self._items.extend(messages)
        self._snapshot = None

    def truncate(self, length: int) -> None:
        """Go back to the first ``length`` messages (a rollback): a new list, O(length)."""
        if length < len(self._items):
            self._items = self._items[:length]
            self._snapshot = None

    def replace(self, messages: Sequence[Message]) -> None:
        """Install a new history (a compaction, a clear, another worker's stored history)."""
        self._items = list(messages)
        self._snapshot = messages if isinstance(messages, tuple) else None

    def mark(self) -> tuple[object, int]:
        """A mark of the log as it is now, for :meth:`appended_since`."""
        return self._items, len(self._items)

    def appended_since(self, mark: tuple[object, int]) -> tuple[Message, ...] | None:
        """The messages appended since ``mark`` (O(them)); ``None`` when anything else changed
        the log since (a rollback, a compaction, a clear: each installs a new list)."""
        items, length = mark
        if items is not self._items or length > len(self._items):
            return None
        return tuple(self._items[length:])

    def same_as(self, messages: Sequence[Message]) -> bool:
        """Whether ``messages`` holds exactly the log's messages (identity first, then ==)."""
        if self._snapshot is not None and messages is self._snapshot:
            return True
        return len(messages) == len(self._items) and all(
            a is b or a == b for a, b in zip(messages, self._items, strict=True)
        )
