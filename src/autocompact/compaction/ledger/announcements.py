"""What the model announces it will do next: a look-up, or a step it tells itself. Pure.

"Let me verify the port is 5433." states no port, and "Let me check the config" decides
nothing: such a sentence of the model's is no decision and what it names no fact (the caller
passes it over). The word sets are closed classes: how the model announces what it does next,
the verbs of looking, the verbs that set a value.
"""

from __future__ import annotations

__all__ = ["SET_VERBS", "is_announcement"]

SET_VERBS = frozenset("set change move bump raise lower switch update make pin".split())  # noqa: SIM905
"""The verbs that set a value (``set X to Y``), in their base form."""

# How the model announces what it does next, the words it may put before the verb, the verbs
# of looking, the adverbs before a step it tells itself ("Now update …").
_LOOKUP_LEADS = frozenset(
    [
        "let me",
        "let's",
        "let us",
        "i'll",
        "i will",
        "we'll",
        "we will",
        "i'm going to",
        "i need to",
    ]
)
_LOOKUP_BEFORE = frozenset(
    """also first now quickly just then briefly start begin by go ahead and""".split()  # noqa: SIM905
)
_LOOKUP_VERBS = frozenset(
    """check double-check re-check recheck look read see verify trace understand explore
    examine inspect investigate search review confirm view study grep checking reading looking
    exploring understanding examining reviewing""".split()  # noqa: SIM905
)
_LOOKUP_NOUNS = frozenset(["exploration", "investigation", "review", "search"])  # conduct a …
_STEP_ADVERBS = frozenset(["now", "next", "then", "first", "so"])  # before an announcement
# (What those open with, lower-cased: most sentences do not, and are passed over in C.)
_LOOKUP_OPENS = (
    "let",
    "i'",
    "i\u2019",
    "i will",
    "i need",
    "we",
    "now",
    "next",
    "then",
    "first",
    "so",
)


def is_announcement(sentence: str) -> bool:
    """Whether ``sentence`` is the model announcing a step yet to take: looking something up
    (``Let me check …``, ``I'll verify …``), or telling itself what to change next (``Now
    update the test to cover …``). No decision, and what it names is yet to be found or done:
    no fact."""
    if not sentence[:8].lower().startswith(_LOOKUP_OPENS):
        return False
    words = [w.strip(",.;:!?") for w in sentence[:160].lower().replace("\u2019", "'").split()]
    at = 0
    while at < len(words) - 1 and words[at] in _STEP_ADVERBS:
        at += 1
    lead = next((n for n in (1, 2, 3) if " ".join(words[at : at + n]) in _LOOKUP_LEADS), 0)
    if not lead:  # a bare verb after "now": a step told to itself (a look-up, or a change)
        return at > 0 and (words[at] in _LOOKUP_VERBS or words[at] in SET_VERBS)
    at += lead
    while at < len(words) - 1 and words[at] in _LOOKUP_BEFORE:
        at += 1
    verb, after = words[at] if at < len(words) else "", words[at + 1 : at + 4]
    return (
        verb in _LOOKUP_VERBS
        or (verb == "find" and after[:1] == ["out"])
        or (verb == "help" and after[:2] == ["you", "understand"])
        or (verb == "conduct" and not _LOOKUP_NOUNS.isdisjoint(after))
    )
