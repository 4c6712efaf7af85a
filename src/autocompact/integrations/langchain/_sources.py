"""The LangChain messages each engine message stands for, by the engine message's identity.

A message's ``id()`` is only unique while the message lives: once it is freed, a message made
later (a cleared copy, a summary) can take the same address. So each entry holds its engine
message, which keeps that id taken for as long as the map lives, and a lookup checks the
identity too: a message never gets another message's LangChain sources.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage

from autocompact.content import Message


class Sources:
    """Engine message -> the LangChain messages it came from (or was converted to)."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[Message, list[BaseMessage]]] = {}

    def get(self, message: Message) -> list[BaseMessage] | None:
        """The LangChain messages of this very message, or ``None``."""
        entry = self._by_id.get(id(message))
        return entry[1] if entry is not None and entry[0] is message else None

    def __getitem__(self, message: Message) -> list[BaseMessage]:
        found = self.get(message)
        if found is None:
            raise KeyError(message)
        return found

    def __setitem__(self, message: Message, sources: list[BaseMessage]) -> None:
        self._by_id[id(message)] = (message, sources)
