"""The extractive summarizer: a state snapshot built from the history itself, no model. Pure.

:func:`extractive_summary` writes the same ``<state_snapshot>`` structure the model is asked
for (see :mod:`autocompact.compaction.prompts`), from what the history records: the user's
requests (all of them, verbatim when they fit), the files read, written and edited and the
commands run (from function call arguments), error results and the action that followed each,
the latest actions, the latest plan (a todo-list tool call when there is one) and the next step.

It is what the offline demo and replay use, and what the engine uses when no model is available
for the side query; its signature fits ``CompressionService(summarizer=...)``.

The output never exceeds ``max_tokens`` by the local estimate (text at 4 characters a token).
When everything does not fit, the least important material goes first (the model's own notes,
code snippets, files only read, commands, older actions, errors), then long user requests are
shortened in the middle, keeping their head, their tail and the key terms (file names, numbers,
identifiers) of the part left out. A user request is dropped only when even that leaves no room.
The output is deterministic: the same history always gives the same text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autocompact.compaction.clearing import is_cleared, read_target
from autocompact.content import (
    FunctionCallPart,
    FunctionResponsePart,
    Message,
    TextPart,
    json_form,
)
from autocompact.errors import ConfigError
from autocompact.estimation import BYTES_PER_TOKEN
from autocompact.thresholds import COMPACT_MAX_OUTPUT_TOKENS

__all__ = ["MIN_SUMMARY_TOKENS", "extractive_summary", "key_terms", "shorten_middle"]

MIN_SUMMARY_TOKENS = 500
"""The smallest ``max_tokens`` accepted: room for the empty structure and a short request."""

_REQUEST_CAP = 8_000  # characters of one user request before any budget pressure
_ITEM_CAP = 300  # characters of one file, command, error or action line
_MIN_REQUEST = 80  # the shortest a user request is cut to before requests are dropped
_RECENT_ACTIONS = 20
_MODEL_NOTES = 20
_CODE_NOTES = 15

_NON_ALNUM = re.compile(r"[^a-z0-9]")
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
_BRIEF_KEYS = (*_PATH_KEYS, "command", "cmd", "pattern", "query", "url", "description", "task_id")
_BULKY_KEYS = frozenset({"content", "new_string", "old_string", "new_str", "old_str", "edits"})

# Text is first split into tokens (linear), then each short token is searched for terms, so
# no pattern ever backtracks over a long run of characters.
_TOKEN = re.compile(r"`[^`\n]{1,80}`|[^\s=,;()\[\]{}<>\"'`|]+")
_TERM_HINT = re.compile(r"[\d/._A-Z-]")  # plain lower-case words hold no term
_MAX_TOKEN = 120  # longer tokens are data (base64, hashes, minified code), not terms
_KEY_TERM = re.compile(
    r"(?:~|\.{1,2})?/?[\w.@+-]+(?:/[\w.@+-]+)+/?"  # paths
    r"|\b[\w-]+(?:\.\w+)+\b"  # file names, dotted names, versions
    r"|^--?[A-Za-z][\w-]*"  # command-line flags
    r"|\b[A-Za-z]+[a-z0-9]*_\w+\b|\b_\w+\b"  # snake_case and _private
    r"|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z0-9]+[A-Z]\w*\b"  # camelCase, PascalCase
    r"|\b[A-Z][A-Z0-9_]{2,}\b"  # CONSTANTS, acronyms
    r"|\b\d[\d,_.:]*\b"  # numbers
)


@functools.lru_cache(maxsize=256)
def _term_spans(text: str) -> tuple[tuple[int, int, str], ...]:
    """Every key term of ``text`` with its start and end, in order (cached: shortening asks
    for the terms of the same long request at many lengths)."""
    spans: list[tuple[int, int, str]] = []
    for token in _TOKEN.finditer(text):
        word = token.group(0)
        if word.startswith("`"):
            spans.append((token.start(), token.end(), word.strip("`")))
            continue
        if len(word) > _MAX_TOKEN or not _TERM_HINT.search(word):
            continue
        for match in _KEY_TERM.finditer(word):
            term = match.group(0).rstrip(".,:")
            if term:
                spans.append((token.start() + match.start(), token.start() + match.end(), term))
    return tuple(spans)


def _unique(terms: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(terms))


def key_terms(text: str) -> list[str]:
    """The key terms of ``text``, in order of first appearance, each once.

    Key terms are what a summary must not lose: backticked code, paths and file names, dotted
    names, command-line flags, snake_case / camelCase / PascalCase identifiers, CONSTANTS and
    numbers.
    """
    return _unique(term for _, _, term in _term_spans(text))


def shorten_middle(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters by removing its middle.

    The head and the tail are kept, and the key terms of the removed middle that do not appear
    in them are listed in the marker, so names and numbers survive. The result is at most
    ``limit`` characters plus a marker of at most 60 characters.
    """
    if len(text) <= limit:
        return text
    limit = max(limit, 20)
    keep = limit * 2 // 3
    head_end, tail_start = keep * 3 // 5, len(text) - keep * 2 // 5
    kept = text[:head_end] + text[tail_start:]
    middle_terms = _unique(
        term for start, end, term in _term_spans(text) if start >= head_end and end <= tail_start
    )
    mention_cap = limit - keep
    terms: list[str] = []
    used = 0
    for term in middle_terms:
        if term in kept:
            continue
        if used + len(term) + 2 > mention_cap:
            break
        terms.append(term)
        used += len(term) + 2
    keep = limit - used
    head, tail = text[: keep * 3 // 5], text[len(text) - keep * 2 // 5 :]
    omitted = len(text) - len(head) - len(tail)
    mentions = f"; mentions {', '.join(terms)}" if terms else ""
    return f"{head} [… {omitted:,} chars cut{mentions} …] {tail}"


# -- facts gathered from the history -----------------------------------------------------------


@dataclass(kw_only=True)
class _Facts:
    requests: list[str] = field(default_factory=list)
    reads: dict[str, int] = field(default_factory=dict)
    writes: dict[str, int] = field(default_factory=dict)
    edits: dict[str, int] = field(default_factory=dict)
    deletes: dict[str, int] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    code: list[str] = field(default_factory=list)
    plan: list[str] = field(default_factory=list)
    last_role: str | None = None
    last_action: str | None = None


def _tool_key(name: str) -> str:
    return _NON_ALNUM.sub("", name.lower())


def _response_text(response: Any) -> str:
    if isinstance(response, str):
        return response
    if isinstance(response, list) and all(
        isinstance(b, Mapping) and isinstance(b.get("text"), str) for b in response
    ):
        return "".join(b["text"] for b in response)
    return json_form(response)


def _one_line(text: str, limit: int = _ITEM_CAP) -> str:
    return shorten_middle(" ".join(text.split()), limit)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return ""


def _brief(call: FunctionCallPart) -> str:
    """``Tool(key=value, ...)`` with the telling arguments, short."""
    args = call.arguments
    keys = [k for k in _BRIEF_KEYS if k in args] or [k for k in args if k not in _BULKY_KEYS][:2]
    shown = ", ".join(f"{k}={_one_line(_as_text(args[k]), 100)}" for k in keys)
    return f"{call.name}({shown})"


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json_form(value)


def _path_of(args: Mapping[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _file_kind(call: FunctionCallPart) -> tuple[str, str] | None:
    """``(kind, path)`` for calls that read, write, edit or delete a file."""
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
        return "write", path
    if key in _EDIT_TOOLS or command in _EDITOR_EDIT:
        return "edit", path
    if key in _DELETE_TOOLS:
        return "delete", path
    return None


def _command_of(call: FunctionCallPart) -> str | None:
    if _file_kind(call) is not None:
        return None
    for key in _COMMAND_KEYS:
        value = call.arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _todos(call: FunctionCallPart) -> list[str] | None:
    todos = call.arguments.get("todos")
    if not isinstance(todos, list):
        return None
    marks = {"completed": "DONE", "done": "DONE", "in_progress": "IN PROGRESS"}
    plan = []
    for todo in todos:
        if isinstance(todo, Mapping):
            text = todo.get("content") or todo.get("text") or todo.get("title") or ""
            mark = marks.get(str(todo.get("status", "")).lower(), "TODO")
            plan.append(f"[{mark}] {_one_line(_as_text(text))}")
    return plan


def _gather(messages: Sequence[Message]) -> _Facts:
    facts = _Facts()
    calls: dict[str, FunctionCallPart] = {}
    pending_errors: list[int] = []  # indexes into facts.errors waiting for the next action

    def resolve(next_action: str) -> None:
        for index in pending_errors:
            facts.errors[index] += f" → next: {next_action}"
        pending_errors.clear()

    for message in messages:
        facts.last_role = message.role
        if message.role == "user":
            # Tool results come before any text the user typed alongside them.
            for part in message.function_responses:
                _record_response(facts, part, calls.get(part.id), pending_errors)
            text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart)).strip()
            if text:
                label = (
                    "(summary of the earlier conversation) " if "<state_snapshot>" in text else ""
                )
                facts.requests.append(label + text)
                resolve(f"user said {_one_line(text, 120)}")
            continue
        text = message.text.strip()
        if text:
            facts.notes.append(_one_line(text))
            if not message.function_calls:
                resolve(f"model replied {_one_line(text, 120)}")
                facts.last_action = f"model replied: {_one_line(text, 200)}"
        for call in message.function_calls:
            calls[call.id] = call
            brief = _brief(call)
            resolve(brief)
            facts.last_action = f"called {brief}"
            _record_call(facts, call)
    for index in pending_errors:
        facts.errors[index] += " → still open"
    return facts


def _record_call(facts: _Facts, call: FunctionCallPart) -> None:
    kind = _file_kind(call)
    if kind is not None:
        book = {"read": facts.reads, "write": facts.writes, "edit": facts.edits}.get(
            kind[0], facts.deletes
        )
        book[kind[1]] = book.get(kind[1], 0) + 1
        if kind[0] in ("write", "edit"):
            facts.code.append(_code_note(kind[0], kind[1], call.arguments))
    todos = _todos(call)
    if todos:
        facts.plan = todos


def _code_note(kind: str, path: str, args: Mapping[str, Any]) -> str:
    if kind == "write":
        content = args.get("content") or args.get("file_text") or ""
        lines = _as_text(content).count("\n") + 1 if content else 0
        return f"{path}: written ({lines} lines)"
    new = args.get("new_string", args.get("new_str"))
    if isinstance(new, str) and new.strip():
        return f"{path}: now has `{_one_line(new, 160)}`"
    return f"{path}: edited"


def _record_response(
    facts: _Facts,
    part: FunctionResponsePart,
    call: FunctionCallPart | None,
    pending_errors: list[int],
) -> None:
    brief = _brief(call) if call is not None else f"{part.name}(call {part.id})"
    text = _response_text(part.response)
    command = _command_of(call) if call is not None else None
    if part.is_error:
        facts.errors.append(f"{brief} failed: {_one_line(_first_line(text) or text, 200)}")
        pending_errors.append(len(facts.errors) - 1)
        outcome = "failed"
    elif is_cleared(part):
        outcome = "ok (output cleared)"
    elif call is not None and read_target(call) is not None:
        outcome = f"ok ({text.count(chr(10)) + 1:,} lines)"
    else:
        line = _last_line(text) if command is not None else _first_line(text)
        outcome = f"ok: {_one_line(line, 100)}" if line else "ok"
    if command is not None:
        facts.commands.append(f"`{_one_line(command, 200)}` → {outcome}")
    facts.actions.append(f"{brief} → {outcome}")


# -- rendering within the budget -----------------------------------------------------------------

_TAGS = (
    "overall_goal",
    "constraints",
    "key_knowledge",
    "file_system_state",
    "code_state",
    "errors_and_fixes",
    "recent_actions",
    "current_plan",
    "next_step",
)


@dataclass(kw_only=True)
class _Block:
    tag: str
    title: str | None
    items: list[str]
    priority: int  # lower is dropped first; 0 is never dropped
    omitted: int = 0

    def lines(self) -> list[str]:
        if not self.items and not self.omitted:
            return []
        out = [self.title] if self.title else []
        if self.omitted:
            plural = "s" if self.omitted != 1 else ""
            out.append(f"- (… {self.omitted:,} earlier item{plural} left out)")
        out.extend(self.items)
        return out


def _blocks(facts: _Facts, request_cap: int, max_chars: int) -> list[_Block]:
    def files(book: dict[str, int], verb: str) -> list[str]:
        return [f"- {path} ({verb} ×{n})" if n > 1 else f"- {path}" for path, n in book.items()]

    requests = [
        f"- [{n}] {shorten_middle(text, request_cap)}" for n, text in enumerate(facts.requests, 1)
    ]
    short = min(400, max_chars // 16)
    goal = (
        shorten_middle(facts.requests[0], min(600, max_chars // 10))
        if facts.requests
        else "(no user request recorded)"
    )
    if len(facts.requests) > 1:
        goal += f"\nLatest request: {shorten_middle(facts.requests[-1], short)}"
    plan = facts.plan or (
        [f"[IN PROGRESS] {_one_line(facts.requests[-1], short)}"] if facts.requests else []
    )
    blocks = [
        _Block(tag="overall_goal", title=None, items=[goal], priority=0),
        _Block(tag="constraints", title="User requests, oldest first:", items=requests, priority=0),
        _Block(
            tag="key_knowledge",
            title="Commands run:",
            items=[f"- {c}" for c in facts.commands],
            priority=4,
        ),
        _Block(
            tag="key_knowledge",
            title="Model notes:",
            items=[f"- {n}" for n in facts.notes[-_MODEL_NOTES:]],
            priority=1,
        ),
        _Block(
            tag="file_system_state",
            title="Written:",
            items=files(facts.writes, "written"),
            priority=7,
        ),
        _Block(
            tag="file_system_state", title="Edited:", items=files(facts.edits, "edits"), priority=7
        ),
        _Block(
            tag="file_system_state",
            title="Deleted:",
            items=files(facts.deletes, "deleted"),
            priority=7,
        ),
        _Block(
            tag="file_system_state", title="Read:", items=files(facts.reads, "reads"), priority=3
        ),
        _Block(
            tag="code_state",
            title=None,
            items=[f"- {c}" for c in facts.code[-_CODE_NOTES:]],
            priority=2,
        ),
        _Block(
            tag="errors_and_fixes", title=None, items=[f"- {e}" for e in facts.errors], priority=6
        ),
        _Block(
            tag="recent_actions",
            title=None,
            items=[f"- {a}" for a in facts.actions[-_RECENT_ACTIONS:]],
            priority=5,
        ),
        _Block(tag="current_plan", title=None, items=[f"- {p}" for p in plan], priority=8),
        _Block(
            tag="next_step",
            title=None,
            items=[shorten_middle(_next_step(facts, short), max_chars // 8)],
            priority=0,
        ),
    ]
    return blocks


def _next_step(facts: _Facts, limit: int) -> str:
    if not facts.requests and facts.last_action is None:
        return "Wait for the user's first request."
    latest = _one_line(facts.requests[-1], limit) if facts.requests else "the task"
    if facts.last_role == "user" and facts.last_action is None:
        return f"Answer the latest user request: {latest}"
    if facts.last_role == "model":
        return f"The last step was: {facts.last_action}. Carry on with: {latest}"
    return f"Read the result of the last step ({facts.last_action}) and carry on with: {latest}"


def _render(blocks: Sequence[_Block]) -> str:
    out = ["<state_snapshot>"]
    for tag in _TAGS:
        lines = [line for b in blocks if b.tag == tag for line in b.lines()]
        out.append(f"    <{tag}>")
        out.extend(lines or ["(nothing recorded)"])
        out.append(f"    </{tag}>")
    out.append("</state_snapshot>")
    return "\n".join(out)


def _drop_to_fit(blocks: list[_Block], max_chars: int) -> None:
    """Drop the oldest items of the least important blocks until the render fits."""
    for block in sorted((b for b in blocks if b.priority), key=lambda b: b.priority):
        excess = len(_render(blocks)) - max_chars
        if excess <= 0:
            return
        dropped = 0
        while block.items and dropped < excess + 40:  # 40: the "left out" line it adds
            dropped += len(block.items.pop(0)) + 1
            block.omitted += 1


def extractive_summary(
    messages: Sequence[Message], *, max_tokens: int = COMPACT_MAX_OUTPUT_TOKENS
) -> str:
    """A deterministic ``<state_snapshot>`` of ``messages``, written without a model.

    Args:
        messages: the part of the history to summarize; it is not modified.
        max_tokens: the most estimated tokens the summary may take (text at 4 characters a
            token), 20K by default like the model's summary.

    Returns:
        The snapshot text, at most ``max_tokens × 4`` characters.

    Raises:
        ConfigError: ``max_tokens`` is below :data:`MIN_SUMMARY_TOKENS`.
    """
    if max_tokens < MIN_SUMMARY_TOKENS:
        raise ConfigError(
            f"max_tokens must be at least {MIN_SUMMARY_TOKENS} for an extractive summary, got "
            f"{max_tokens}: pass a larger cap",
            key="max_tokens",
        )
    max_chars = max_tokens * BYTES_PER_TOKEN
    facts = _gather(messages)
    cap = min(_REQUEST_CAP, max_chars // 3)
    blocks = _blocks(facts, cap, max_chars)
    text = _render(blocks)
    if len(text) <= max_chars:
        return text
    _drop_to_fit(blocks, max_chars)
    text = _render(blocks)
    if len(text) <= max_chars:
        return text
    return _fit_requests(facts, blocks, max_chars, cap)


def _fit_requests(facts: _Facts, blocks: list[_Block], max_chars: int, cap: int) -> str:
    """Shorten the user requests (all to one length), then drop middle ones, then cut."""
    constraints = next(b for b in blocks if b.tag == "constraints")

    def render_with(limit: int, skip: int = 0) -> str:
        items = [f"- [{n}] {shorten_middle(t, limit)}" for n, t in enumerate(facts.requests, 1)]
        if skip:  # keep the first request, leave out the `skip` oldest after it
            note = f"- (… requests 2–{skip + 1} left out: no room)"
            items = [items[0], note, *items[1 + skip :]]
        constraints.items = items
        return _render(blocks)

    low, high = _MIN_REQUEST, cap
    if len(render_with(low)) <= max_chars:
        while low < high:  # the largest per-request length that fits
            mid = (low + high + 1) // 2
            if len(render_with(mid)) <= max_chars:
                low = mid
            else:
                high = mid - 1
        return render_with(low)
    low, high = 0, max(0, len(facts.requests) - 2)
    while low < high:  # the fewest requests left out that fits
        mid = (low + high) // 2
        if len(render_with(_MIN_REQUEST, mid)) <= max_chars:
            high = mid
        else:
            low = mid + 1
    text = render_with(_MIN_REQUEST, low)
    if len(text) <= max_chars:
        return text
    closing = "\n</state_snapshot>"
    return text[: max_chars - len(closing)] + closing
