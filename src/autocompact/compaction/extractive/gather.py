"""What to keep: one pass over the history collects the items a summary is made of. Pure.

Items are short lines, each with a section (the ``<state_snapshot>`` tag it belongs in), a
kind, a priority and a position (newer is larger). What is collected:

- from the user's own text (never harness lines such as ``[Request interrupted by user]``,
  command echoes or system reminders): the goal (the first request) and its later changes, and
  every sentence that constrains the work (must / never / always / only / do not, limits,
  budgets, deadlines, versions) or states a fact (``X is Y``, ``X: Y``, with a name or number);
  a fact's key keeps only its latest value;
- from tool calls: each file touched, relative to the project root, with its last action;
  commands run; the latest todo list;
- from tool results: each error with the line that says what failed (not ``Exit code 2``);
- from an earlier summary at the start: its items, section by section, as the oldest items
  (SPEC §10.5: the new summary updates it; it is never quoted whole).

Linear in the size of the history: each message is read once; a request's sentences are
classified together, in C where possible (``_flagged``), so plain chatter costs little.
"""

from __future__ import annotations

import posixpath
import re
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, count
from operator import add
from typing import Any, NamedTuple

from autocompact.compaction.clearing import is_cleared, read_target
from autocompact.compaction.extractive.sentences import sentence_list
from autocompact.content import FunctionCallPart, FunctionResponsePart, Message, TextPart, json_form

__all__ = ["Item", "Material", "gather"]

# Sections, in the order of the model's snapshot.
GOAL, CONSTRAINTS, KNOWLEDGE, FILES, ERRORS, ACTIONS, PLAN, NEXT = (
    "overall_goal",
    "constraints",
    "key_knowledge",
    "file_system_state",
    "errors_and_fixes",
    "recent_actions",
    "current_plan",
    "next_step",
)

_HARNESS = re.compile(
    r"^\s*(?:\[Request interrupted|\[Tool output cleared|<command-|<local-command|"
    r"<system-reminder>|Caveat: |<bash-(?:input|stdout|stderr)>|This session continues|"
    r"This session is being continued|"
    r"Acknowledged\.|Got it\.|Continue(?: from where you left off)?\.?$)",
    re.IGNORECASE,
)
# Keyword tests run on a word set and plain substrings (C speed); big case-insensitive
# alternations cost a fifth of a millisecond per sentence.
_CONSTRAINT_WORDS = frozenset(
    {
        "must",
        "never",
        "always",
        "only",
        "don't",
        "dont",
        "shouldn't",
        "cannot",
        "can't",
        "require",
        "required",
        "requirement",
        "requirements",
        "limit",
        "limits",
        "budget",
        "deadline",
        "prefer",
        "preference",
        "avoid",
        "under",
        "version",
        "rule",
        "rules",
        "mandatory",
        "forbidden",
    }
)
_CONSTRAINT_PHRASES = ("do not", "should not", "at most", "at least", "no more than", "no later")
_GOAL_WORDS = frozenset({"instead"})
_GOAL_PHRASES = (
    "change of plan",
    "new goal",
    "now we want",
    "now we need",
    "now i want",
    "now i need",
    "actually, let",
    "actually let",
    "switch to",
    "switching to",
    "forget about",
    "scratch that",
    "goal is now",
    "from now on",
)
_CONSTRAINT_TOKENS = frozenset(w.encode() for w in _CONSTRAINT_WORDS)
_GOAL_TOKENS = frozenset(w.encode() for w in _GOAL_WORDS)
# The keywords and phrases of a whole message are found in one scan (``_word_lines``), over its
# words: lower case, one byte a code point (``?`` for one outside ASCII), every byte but a
# letter or an apostrophe a space (``_SCAN_BYTES``; the words are the runs of ``[a-z']``, as
# ``re.findall(r"[a-z']+", lower)`` gives them), with a space at each end. The pattern opens with
# that space, a one-character literal, which ``re`` skips to in C (a pattern opening with a
# class of characters is tried at every position, about ten times slower); there it matches a
# keyword as a whole word, or a phrase from its first space on with the words before it behind
# (a phrase is a plain substring: ``at most`` is in ``what most``). Punctuation is a space here,
# so a phrase hit is confirmed on the lower-cased text itself.
_SCAN_BYTES = bytes(b if (0x61 <= b <= 0x7A or b == 0x27) else 0x20 for b in range(256))


_Meaning = tuple[tuple[str, int, bool], ...]


def _scan_pattern(
    constraint_phrases: tuple[str, ...], goal_phrases: tuple[str, ...]
) -> tuple[re.Pattern[bytes], dict[bytes, _Meaning]]:
    """The scan, and what the text each match consumes after its space may be: entries of a
    phrase (``""`` for a keyword), the offset of the phrase's first space, and whether it is a
    goal word or phrase (else a constraint one)."""
    meaning: dict[bytes, _Meaning] = {}
    tails: dict[bytes, list[bytes]] = {}
    for word in sorted(_CONSTRAINT_TOKENS | _GOAL_TOKENS):
        meaning[word] = (*meaning.get(word, ()), ("", 0, word in _GOAL_TOKENS))
        tails.setdefault(word[:1], []).append(re.escape(word[1:]) + rb"(?= )")
    behind: dict[bytes, list[bytes]] = {}
    for goal, phrases in ((False, constraint_phrases), (True, goal_phrases)):
        for phrase in phrases:
            words = phrase.encode().translate(_SCAN_BYTES)
            space = words.index(b" ")
            rest = words[space + 1 :]
            behind.setdefault(rest, []).append(rb"(?<=" + re.escape(words) + rb")")
            meaning[rest] = (*meaning.get(rest, ()), (phrase, space, goal))
    for rest, looks in behind.items():
        tails.setdefault(rest[:1], []).append(
            re.escape(rest[1:]) + rb"(?:" + b"|".join(looks) + rb")"
        )
    body = b"|".join(
        re.escape(first) + rb"(?:" + b"|".join(alternatives) + rb")"
        for first, alternatives in tails.items()
    )
    return re.compile(rb" (?:" + body + rb")"), meaning


_SCAN, _SCAN_MEANING = _scan_pattern(_CONSTRAINT_PHRASES, _GOAL_PHRASES)
# The term test's first pass (``_term_lines``), on one byte class a character: a line can hold
# a term only if it holds ``#`` (a digit, ``/``, a backtick, ``_``, or a backslash:
# ``backslashreplace`` writes every character outside ASCII with one, so such a line always
# goes on to the exact test), a letter before a capital (``aA``, ``AA``) or a full stop before
# a letter (``.a``, ``.A``). Only the lines that pass run ``_HAS_TERM``.
_TERM_CLASS = bytes(
    0x23
    if (0x30 <= b <= 0x39 or b in b"/`_\\")
    else 0x61
    if 0x61 <= b <= 0x7A
    else 0x41
    if 0x41 <= b <= 0x5A
    else b
    if b in b".\n"
    else 0x20
    for b in range(256)
)
# ``#``, then a capital after a letter, then a full stop before a letter: each pattern opens with
# one literal character (see ``_SCAN``).
_TERM_HINTS = (re.compile(rb"#"), re.compile(rb"A(?<=[aA]A)"), re.compile(rb"\.(?=[aA])"))


_FACT = re.compile(
    r"^(?P<key>[A-Za-z][\w ./'`-]{2,60}?)\s+(?:is|are|was|=|:|equals|lives in|runs on)\s+"
    r"(?:now\s+|still\s+)?(?P<value>\S.*)$",
)
# A term: a digit, ``/``, a backtick, a word in capitals, ``a_b``, ``a.b`` or ``aB``. The pattern
# opens with one character class, so ``re`` skips in C to the next character that can start one
# (an alternation of the same tests is tried at every position, about twenty times slower).
_HAS_TERM = re.compile(
    r"[\d/`_.A-Z](?:(?<=[\d/`])|(?<=\w[_.])(?=\w)|(?<=[a-z][A-Z])|(?<!\w.)(?<=[A-Z])[A-Z]+\b)"
)
_ERROR_LINE = re.compile(
    r"error|failed|failure|exception|not found|no such|denied|cannot|can't|fatal|invalid|"
    r"refused|timed? ?out|traceback|assert",
    re.IGNORECASE,
)
_EXIT_CODE = re.compile(r"^\s*(?:exit code|exited with|return code)\s*\d+\s*$", re.IGNORECASE)
_WRITE_TOOLS = frozenset(
    {"write", "writefile", "createfile", "create", "savefile", "notebookwrite"}
)
_EDIT_TOOLS = frozenset(
    {
        "edit",
        "multiedit",
        "editfile",
        "strreplace",
        "replace",
        "notebookedit",
        "applypatch",
        "patch",
        "searchreplace",
    }
)
_DELETE_TOOLS = frozenset({"delete", "deletefile", "remove", "removefile", "rm"})
_EDITOR_WRITE = frozenset({"create"})
_EDITOR_EDIT = frozenset({"str_replace", "insert", "undo_edit", "edit"})
_PATH_KEYS = ("file_path", "path", "filename", "notebook_path", "filepath", "file", "target_file")
_COMMAND_KEYS = ("command", "cmd", "script")
_NON_ALNUM = re.compile(r"[^a-z0-9]")
_ACTION_RANK = {"read": 0, "edited": 1, "written": 1, "deleted": 1}


class Item(NamedTuple):
    """One line the summary may hold (a named tuple, not a frozen dataclass: a long history
    gathers tens of thousands, and a tuple is made in a third of the time).

    Attributes:
        section: the snapshot tag it belongs in.
        text: the line, without the leading ``- ``.
        priority: higher is kept first.
        position: its order in the history (newer is larger; an earlier summary's are lowest).
        key: items with the same key are one fact; only the newest is kept.
    """

    section: str
    text: str
    priority: int
    position: int
    key: str = ""


@dataclass(kw_only=True)
class Material:
    """Everything gathered, before ranking."""

    items: list[Item] = field(default_factory=list)
    files: dict[str, tuple[str, int]] = field(default_factory=dict)  # path -> (action, position)
    paths: list[str] = field(default_factory=list)  # every absolute path seen (for the root)
    plan: list[str] = field(default_factory=list)
    plan_position: int = 0
    latest_request: str = ""
    last_action: str = ""
    position: int = 0
    has_goal: bool = False

    def add(self, section: str, text: str, priority: int, key: str = "") -> None:
        self.position += 1
        self.items.append(Item(section, text, priority, self.position, key))  # positional: faster


def _tool_key(name: str) -> str:
    return _NON_ALNUM.sub("", name.lower())


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json_form(value)


def _response_text(response: Any) -> str:
    if isinstance(response, str):
        return response
    if isinstance(response, list) and all(
        isinstance(b, Mapping) and isinstance(b.get("text"), str) for b in response
    ):
        return "".join(b["text"] for b in response)
    return json_form(response)


def _path_of(args: Mapping[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return posixpath.normpath(value.strip())
    return None


def _file_action(call: FunctionCallPart) -> tuple[str, str] | None:
    target = read_target(call)
    if target is not None:
        return "read", target[0]
    path = _path_of(call.arguments)
    if path is None:
        return None
    key = _tool_key(call.name)
    command = call.arguments.get("command")
    command = command if isinstance(command, str) else ""
    if key in _WRITE_TOOLS or command in _EDITOR_WRITE:
        return "written", path
    if key in _EDIT_TOOLS or command in _EDITOR_EDIT:
        return "edited", path
    if key in _DELETE_TOOLS:
        return "deleted", path
    return None


def _command_of(call: FunctionCallPart) -> str | None:
    for key in _COMMAND_KEYS:
        value = call.arguments.get(key)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return None


def _brief(call: FunctionCallPart | None, name: str) -> str:
    if call is None:
        return name
    command = _command_of(call)
    if command is not None:
        return f"{call.name} `{command[:120]}`"
    action = _file_action(call)
    if action is not None:
        return f"{call.name} {action[1]}"
    return call.name


def error_line(text: str) -> str:
    """The line of a failed tool's output that says what failed."""
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    lines = [line for line in lines if not _EXIT_CODE.match(line)]
    for line in lines:
        if _ERROR_LINE.search(line):
            return line[:300]
    return lines[0][:300] if lines else "failed"


# Three runs of two or more letters: the first pair found opens the first run, and each later
# pair follows a character that is not a letter, so it opens a run of its own.
_THREE_WORDS = re.compile(r"[A-Za-z]{2}(?:.*?[^A-Za-z][A-Za-z]{2}){2}", re.S)
_NOT_PROSE = ("```", "{", "}", "<", "|", "#!")
# What a harness line can start with (``_HARNESS`` ignores case); other lines skip the pattern.
_HARNESS_FIRST = frozenset("[<CcTtAaGg")
# The first three characters of a harness sentence, lower-cased: a sentence is stripped, so only
# those decide whether to try ``_HARNESS`` (one outside ASCII always tries it: ``re`` matches
# some of them to an ASCII letter when it ignores case).
_HARNESS_HEADS = frozenset(
    ("[re", "[to", "<co", "<lo", "<sy", "cav", "<ba", "thi", "ack", "got", "con")
)


def _harness(line: str) -> bool:
    first = line[:1]
    return (first in _HARNESS_FIRST or first.isspace()) and _HARNESS.match(line) is not None


def _prose(line: str) -> bool:
    """A sentence worth keeping: a few words, not a code line or a list number."""
    if len(line) < 12 or line.startswith(_NOT_PROSE):
        return False
    return _THREE_WORDS.search(line) is not None


def _flagged(lines: Sequence[str], first_request: bool) -> Iterable[tuple[str, str]]:
    """The sentences of one request that can be kept, each with the section it goes to.

    A sentence is kept when it constrains the work (a constraint word or phrase), changes the
    goal (not in the first request) or holds a term, and is prose. Each test scans the whole
    message at once in C and reports the lines it hits (``_word_lines``, ``_term_lines``);
    Python-level work is per hit, so plain chatter costs little.
    """
    if not lines:
        return
    joined = "\n".join(lines)
    # Lower-casing the joined text gives each line's lower case (a line break is uncased, like
    # the ends of a string, and no lower case holds one); it may change the length of a
    # non-ASCII text, so its line ends are its own.
    lower = joined.lower()
    simple = joined.isascii()
    ends = _line_ends(map(len, lines)) if simple else _line_ends(map(len, lower.split("\n")))
    constraint, goal = _word_lines(lower, ends)
    if first_request:
        goal = set()
    # A first pass pays for itself over many lines; a few go straight to ``_HAS_TERM``.
    term = (
        _term_lines(joined, ends if simple else None) if len(lines) > 3 else set(range(len(lines)))
    )
    for index in sorted(constraint | goal | term):
        line = lines[index]
        if len(line) < 12:
            continue
        if index in constraint:
            section = CONSTRAINTS
        elif index in goal:
            section = GOAL
        elif index in term and _HAS_TERM.search(line):
            section = KNOWLEDGE
        else:
            continue
        if _prose(line):
            yield section, line


def _line_ends(lengths: Iterable[int]) -> list[int]:
    """The offset of the line break after each line (the text's length after the last) of
    lines of ``lengths`` joined by line breaks."""
    return list(map(add, accumulate(lengths), count()))


def _word_lines(lower: str, ends: Sequence[int]) -> tuple[set[int], set[int]]:
    """The lines of ``lower`` holding a constraint word or phrase, and those holding a goal
    word or phrase (one ``_SCAN`` over the whole text; Python-level work per hit)."""
    constraint: set[int] = set()
    goal: set[int] = set()
    words = b" " + lower.encode("ascii", "replace").translate(_SCAN_BYTES) + b" "
    for match in _SCAN.finditer(words):
        at = match.start()  # the space; ``lower[at]`` is the first letter after it
        for phrase, space, is_goal in _SCAN_MEANING[match.group()[1:]]:
            if phrase:
                start = at - 1 - space
                if not lower.startswith(phrase, start):
                    continue
            elif words[match.end()] == 0x20:
                start = at
            else:
                continue
            (goal if is_goal else constraint).add(bisect_left(ends, start))
    return constraint, goal


def _term_lines(joined: str, ends: Sequence[int] | None) -> set[int]:
    """The lines of ``joined`` that may hold a term: a superset of those ``_HAS_TERM`` finds
    (``_TERM_CLASS``), found in C; ``ends`` are the line ends when ``joined`` is ASCII."""
    classes = joined.encode("ascii", "backslashreplace").translate(_TERM_CLASS)
    if ends is None:
        ends = _line_ends(map(len, classes.split(b"\n")))
    found: set[int] = set()
    for hint in _TERM_HINTS:
        match = hint.search(classes)
        while match is not None:
            line = bisect_left(ends, match.start())
            found.add(line)
            match = hint.search(classes, ends[line] + 1)
    return found


def _keep_user_sentence(material: Material, section: str, line: str) -> None:
    if section == GOAL:
        material.add(GOAL, f"Changed: {line}", 85)
        return
    fact = _sentence_fact(line)
    if section == CONSTRAINTS:
        material.add(CONSTRAINTS, line, 80, key=_fact_key(fact) if fact else "")
    elif fact:
        material.add(KNOWLEDGE, line, 70, key=_fact_key(fact))
    else:
        material.add(KNOWLEDGE, line, 30)


_LEAD = re.compile(r"^(?:update|updated|note|fyi|also|correction|reminder|btw)\s*[:,-]\s*", re.I)


# What stands between a fact's key and its value (``_FACT``) in a sentence, whose only blanks
# are single spaces (``sentences``): a sentence holding none of these is no fact.
_FACT_JOINS = (" is ", " are ", " was ", " = ", " : ", " equals ", " lives in ", " runs on ")


def _sentence_fact(line: str) -> re.Match[str] | None:
    """``_fact`` of a sentence (of ``sentences``: single spaces only)."""
    return _fact(line) if any(map(line.__contains__, _FACT_JOINS)) else None


def _fact(line: str) -> re.Match[str] | None:
    lead = _LEAD.match(line)
    return _FACT.match(line[lead.end() :] if lead else line)


_KEY_FILLER = re.compile(r"\b(?:the|a|an|our|my|now|still|update|updated|note|fyi)\b[:,]?")


def _fact_key(match: re.Match[str]) -> str:
    key = _KEY_FILLER.sub(" ", match.group("key").lower())
    return "fact:" + " ".join(key.split())


def _user_text(material: Material, text: str) -> None:
    # Harness sentences are left out; only those that count are tested (the first ones, for the
    # goal and the request's head, and those kept as items).
    lines = sentence_list(text)
    start = next((i for i, line in enumerate(lines) if not _is_harness(line)), None)
    if start is None:
        return
    first_request = not material.has_goal
    material.latest_request = _request_head(line for line in lines[start:] if not _is_harness(line))
    if first_request:
        material.add(GOAL, lines[start], 100)
        material.has_goal = True
        start += 1
    for section, line in _flagged(lines[start:], first_request):
        if not _is_harness(line):
            _keep_user_sentence(material, section, line)


def _is_harness(sentence: str) -> bool:
    """Whether a (stripped) sentence is a harness line (``_HARNESS``)."""
    head = sentence[:3].lower()
    return (head in _HARNESS_HEADS or not head.isascii()) and _HARNESS.match(sentence) is not None


def _request_head(lines: Iterable[str], limit: int = 160) -> str:
    """The request's sentences joined, cut after ``limit`` characters on a word boundary; only
    the sentences that reach the cut are joined."""
    head: list[str] = []
    size = -1
    for line in lines:
        head.append(line)
        size += len(line) + 1
        if size > limit:
            break
    request = " ".join(head)
    return request if len(request) <= limit else request[:limit].rsplit(" ", 1)[0] + "…"


def _previous_summary(material: Material, text: str) -> bool:
    """Seed the material with an earlier snapshot's items; ``True`` when ``text`` was one."""
    start = text.find("<state_snapshot>")
    if start < 0:
        return False
    inner = text[start + len("<state_snapshot>") :]
    for match in re.finditer(r"<(\w+)>\n?(.*?)</\1>", inner, re.S):
        tag, body = match.group(1), match.group(2)
        for raw in body.splitlines():
            line = raw.strip()
            if line.startswith("- "):
                line = line[2:]
            if not line or _harness(line):
                continue
            fact = _fact(line)
            priority = {GOAL: 100, CONSTRAINTS: 80, KNOWLEDGE: 70, ERRORS: 60, FILES: 55}.get(
                tag, 20
            )
            if tag == FILES:
                _seed_file(material, line)
            elif tag in (PLAN, NEXT, ACTIONS):
                continue  # superseded by what follows
            else:
                key = _fact_key(fact) if fact and tag in (CONSTRAINTS, KNOWLEDGE) else ""
                material.add(tag, line, priority, key=key)
                material.has_goal = material.has_goal or tag == GOAL
    return True


def _seed_file(material: Material, line: str) -> None:
    path, _, action = line.rpartition(" (")
    if path and action.endswith(")"):
        material.position += 1
        material.files[path] = (action[:-1], material.position)


def _record_call(material: Material, call: FunctionCallPart) -> None:
    action = _file_action(call)
    if action is not None:
        verb, path = action
        if path.startswith("/"):
            material.paths.append(path)
        previous = material.files.get(path)
        if previous is not None and _ACTION_RANK[previous[0]] > _ACTION_RANK[verb]:
            verb = previous[0]  # a file edited then read is still an edited file
        material.position += 1
        material.files[path] = (verb, material.position)
    todos = call.arguments.get("todos")
    if isinstance(todos, list):
        marks = {"completed": "DONE", "done": "DONE", "in_progress": "IN PROGRESS"}
        plan = []
        for todo in todos:
            if isinstance(todo, Mapping):
                text = todo.get("content") or todo.get("text") or todo.get("title") or ""
                mark = marks.get(str(todo.get("status", "")).lower(), "TODO")
                plan.append(f"[{mark}] {' '.join(_as_text(text).split())[:200]}")
        material.plan = plan
        material.plan_position = material.position
    material.last_action = _brief(call, call.name)


def _record_response(
    material: Material, part: FunctionResponsePart, call: FunctionCallPart | None
) -> None:
    if part.is_error and not is_cleared(part):
        line = error_line(_response_text(part.response))
        material.add(ERRORS, f"{_brief(call, part.name)} failed: {line}", 60)
    elif call is not None and _command_of(call) is not None:
        material.add(ACTIONS, f"ran {_brief(call, part.name)}", 10)


def gather(messages: Sequence[Message]) -> Material:
    """Collect the items of a summary from ``messages`` (see the module docstring)."""
    material = Material()
    calls: dict[str, FunctionCallPart] = {}
    for index, message in enumerate(messages):
        if message.role == "user":
            for part in message.function_responses:
                _record_response(material, part, calls.get(part.id))
            text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart))
            if index == 0 and _previous_summary(material, text):
                continue
            _user_text(material, text)
            continue
        for call in message.function_calls:
            calls[call.id] = call
            _record_call(material, call)
        text = message.text.strip()
        if text and not message.function_calls:
            material.last_action = f"replied: {' '.join(text.split())[:160]}"
        for line in sentence_list(text):
            if (
                len(line) < 200
                and any(map(line.__contains__, _FACT_JOINS))
                and _HAS_TERM.search(line)
                and _prose(line)
            ):
                fact = _fact(line)
                if fact:
                    material.add(KNOWLEDGE, line, 25, key=_fact_key(fact))
    return material


def project_root(paths: Sequence[str]) -> str:
    """The longest directory prefix shared by the absolute paths (``""`` when none)."""
    if not paths:
        return ""
    root = posixpath.commonpath(paths)
    if root in paths:  # a single file: its directory
        root = posixpath.dirname(root)
    if posixpath.basename(root) in _SOURCE_DIRS:  # the project is the folder above src/
        root = posixpath.dirname(root)
    return "" if root in ("", "/") else root


_SOURCE_DIRS = frozenset({"src", "lib", "test", "tests", "app", "pkg", "cmd", "internal"})
