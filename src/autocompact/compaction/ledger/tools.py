"""What tool calls and results tell the ledger: files, commands, errors, results, todos. Pure.

An error is keyed by what failed (the command's head, or the tool and its file); a later call
of the same key that succeeds, or a later passing run of the same kind (a test run after a
failing test run), marks it fixed. A tool rejection by the user is not an error: it is the
harness's protocol, and what the user said with it is user text.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from autocompact.compaction.clearing import read_target
from autocompact.compaction.ledger.model import Entry
from autocompact.compaction.ledger.text import whole_words
from autocompact.content import FunctionCallPart, json_form
from autocompact.toolmedia import media_blocks, without_media

__all__ = [
    "SOURCE_DIRS",
    "brief",
    "chain_keys",
    "command_key",
    "command_of",
    "error_key",
    "error_line",
    "file_action",
    "file_entries",
    "kind_of",
    "project_root",
    "read_error_key",
    "response_text",
    "result_line",
    "todos_of",
]

_ERROR_LINE = re.compile(
    r"error|failed|failure|exception|not found|no such|denied|cannot|can't|fatal|invalid|"
    r"refused|rejected|timed? ?out|traceback|assert",
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
SOURCE_DIRS = frozenset({"src", "lib", "test", "tests", "app", "pkg", "cmd", "internal"})

# What kind of run a command is: the runners' own names (tool protocol, not the user's words).
_KINDS = (
    (
        "tests",
        re.compile(
            r"\b(?:pytest|py\.test|jest|vitest|mocha|rspec|phpunit|tox|nox|ctest|unittest|"
            r"go test|cargo test|npm (?:run )?test|yarn test|pnpm test|mix test|make test|"
            r"gradle test|mvn test|dotnet test|bun test)\b"
        ),
    ),
    (
        "lint",
        re.compile(
            r"\b(?:ruff|mypy|pyright|eslint|flake8|pylint|clippy|black|prettier|credo|"
            r"dialyzer|golangci-lint|tsc --noemit|lint|lint-imports|format --check)\b"
        ),
    ),
    (
        "build",
        re.compile(
            r"\b(?:cargo build|go build|npm run build|yarn build|pnpm build|make|cmake|tsc|"
            r"gradle|mvn|mix compile|dotnet build|docker build|pip install|uv sync)\b"
        ),
    ),
)
_RESULT_LINE = re.compile(
    r"\b\d+ (?:passed|failed|errors?|failures?|warnings?|tests?|skipped)\b|\bOK\b|\bFAILED\b|"
    r"\bpassed\b|\bsuccess|\bAll checks passed|\bno issues\b|\bFinished\b|\bBUILD\b",
    re.IGNORECASE,
)


def _in_ascii(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """``pattern`` for a text in ASCII, where it finds the same matches: ``\\b`` and ``\\d`` then
    read a table, not the Unicode database (``\\s`` would differ; none of these holds it)."""
    return re.compile(pattern.pattern, (pattern.flags & ~re.UNICODE) | re.ASCII)


_ERROR_LINE_ASCII = _in_ascii(_ERROR_LINE)
_RESULT_LINE_ASCII = _in_ascii(_RESULT_LINE)
_KINDS_ASCII = tuple((kind, _in_ascii(pattern)) for kind, pattern in _KINDS)
# A quoted argument (after an option's "=" or a word and a blank: a quoted program that opens
# the command or follows "&&", ";", "|" or "(" is no argument), to the end of what is read when
# its quote does not close there; and a shell handed its command in quotes.
_QUOTED = re.compile(r"(?:(?<=[^&;|(\s]\s)|(?<==))(?:\"[^\"]*(?:\"|$)|'[^']*(?:'|$))")
_SHELL_C = re.compile(r"(?:ba|z|da)?sh\s+-\w*c\b")
_COMMAND_HEAD = re.compile(r"^(?:(?:cd\s+\S+|\w+=\S*|export\s+\S+)\s*(?:&&|;)?\s*)*")


def _past_head(command: str) -> str:
    """``command`` past its ``cd``, ``export`` and variables: the pattern matches at the start
    only (empty when there are none), so one ``match`` does what a ``sub`` does without reading
    the rest of a long command."""
    match = _COMMAND_HEAD.match(command)
    return command[match.end() :] if match is not None else command


def tool_key(name: str) -> str:
    """A tool's name, lower case, letters and digits only."""
    return _NON_ALNUM.sub("", name.lower())


def response_text(response: Any) -> str:
    """A tool result's text (an image or document it returned left out: no text to read)."""
    if isinstance(response, str):
        return response
    if media_blocks(response):
        response = without_media(response)
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


def file_action(call: FunctionCallPart) -> tuple[str, str] | None:
    """``(action, path)`` of a call that reads, writes, edits or deletes a file."""
    target = read_target(call)
    if target is not None:
        return "read", target[0]
    path = _path_of(call.arguments)
    if path is None:
        return None
    key = tool_key(call.name)
    command = call.arguments.get("command")
    command = command if isinstance(command, str) else ""
    if key in _WRITE_TOOLS or command in _EDITOR_WRITE:
        return "written", path
    if key in _EDIT_TOOLS or command in _EDITOR_EDIT:
        return "edited", path
    if key in _DELETE_TOOLS:
        return "deleted", path
    return None


def command_of(call: FunctionCallPart) -> str | None:
    """The shell command a call runs, blanks collapsed."""
    for key in _COMMAND_KEYS:
        value = call.arguments.get(key)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return None


def brief(call: FunctionCallPart | None, name: str) -> str:
    """A call in a few words: the tool and its command or file."""
    if call is None:
        return name
    command = command_of(call)
    if command is not None:
        return f"{call.name} `{whole_words(command, 120)}`"
    action = file_action(call)
    if action is not None:
        return f"{call.name} {action[1]}"
    return call.name


def kind_of(command: str) -> str:
    """``tests``, ``lint`` or ``build`` for a run of that kind, else ``""``: a runner named
    outside quotes (``bd create --title="Configure Credo"`` and ``git commit -m "fix lint"``
    run none), or inside the quotes of ``sh -c``."""
    lower = _past_head(command.lower())[:80]  # the runner, not its arguments
    if ('"' in lower or "'" in lower) and not _SHELL_C.match(lower):
        lower = _QUOTED.sub(" ", lower)
    for kind, pattern in _KINDS_ASCII if lower.isascii() else _KINDS:
        if pattern.search(lower):
            return kind
    return ""


def error_key(call: FunctionCallPart | None, name: str) -> str:
    """What an error is about: the command's first two words, or the tool and its file."""
    if call is None:
        return tool_key(name)
    command = command_of(call)
    return read_error_key(call, command, file_action(call) if command is None else None)


def read_error_key(
    call: FunctionCallPart, command: str | None, action: tuple[str, str] | None
) -> str:
    """:func:`error_key` of a call whose ``command_of`` and ``file_action`` are known."""
    if command is not None:
        return command_key(command)
    return f"{tool_key(call.name)}:{action[1] if action else ''}"


def command_key(command: str) -> str:
    """The key of a command's errors: its first two words, past ``cd`` and variables."""
    return "cmd:" + " ".join(_past_head(command).split(None, 2)[:2])


def chain_keys(command: str, key: str) -> set[str]:
    """``key`` (the command's own) and the keys of the commands ``&&`` chains in ``command``
    before its first quote or substitution: when it succeeds, each of them did (a quoted text,
    a commit message, is no command, even one that says ``&&``)."""
    if "&&" not in command:
        return {key}
    return {key, *(command_key(part) for part in _QUOTE.split(command, 1)[0].split("&&"))}


_QUOTE = re.compile(r"[\"'`$<]")  # a quote, a substitution, a heredoc or a redirection


def error_line(text: str) -> str:
    """The line of a failed tool's output that says what failed."""
    tail = text[-20_000:]
    error = _ERROR_LINE_ASCII if tail.isascii() else _ERROR_LINE
    first = None  # the first line that is neither blank nor an exit code: read up to the one
    for raw in tail.splitlines():
        if not raw.strip():
            continue
        line = " ".join(raw.split())
        if _EXIT_CODE.match(line):
            continue
        if error.search(line):
            return whole_words(line, 300)
        if first is None:
            first = line
    return whole_words(first, 300) if first is not None else "failed"


def result_line(text: str, failed: bool) -> str:
    """The line of a run's output that gives its result (the last that names one)."""
    tail = text[-4_000:]
    result = _RESULT_LINE_ASCII if tail.isascii() else _RESULT_LINE
    for line in reversed(tail.splitlines()):
        if result.search(line):
            return whole_words(" ".join(line.split()), 200)
    return "failed" if failed else "succeeded"


def todos_of(call: FunctionCallPart) -> list[tuple[str, str]] | None:
    """A todo list a call writes: ``(DONE | IN PROGRESS | TODO, text)`` each, else ``None``."""
    todos = call.arguments.get("todos")
    if not isinstance(todos, list):
        return None
    marks = {"completed": "DONE", "done": "DONE", "in_progress": "IN PROGRESS"}
    out = []
    for todo in todos:
        if isinstance(todo, Mapping):
            text = todo.get("content") or todo.get("text") or todo.get("title") or ""
            text = text if isinstance(text, str) else json_form(text)
            mark = marks.get(str(todo.get("status", "")).lower(), "TODO")
            out.append((mark, whole_words(" ".join(text.split()), 200)))
    return out


def file_entries(
    files: Mapping[str, tuple[str, int]], paths: Iterable[str], carried: Sequence[Entry]
) -> tuple[Entry, ...]:
    """The files section: each file with its last action (``files``: path → action and
    position), relative to the project's root (found among the absolute ``paths``), after the
    ``carried`` ones an earlier summary listed."""
    root = project_root(list(paths))  # (the same root, each path read once)
    out: dict[str, Entry] = {e.key: e for e in carried}
    for path, (action, position) in files.items():
        shown = path[len(root) + 1 :] if root and path.startswith(root + "/") else path
        out[shown] = Entry(f"{shown} ({action})", 0.0, position, shown, mark=action)
    return tuple(sorted(out.values(), key=lambda e: e.position))


def project_root(paths: Sequence[str]) -> str:
    """The longest directory prefix shared by the absolute paths under the top folder most of
    them are in (``""`` when none): a scratch file elsewhere (a background task's output under
    ``/tmp``) is not the project."""
    if not paths:
        return ""
    tops = Counter(path.split("/", 2)[1] for path in paths)  # ("/home/…" → "home")
    top = tops.most_common(1)[0][0]
    root = posixpath.commonpath([path for path in paths if path.split("/", 2)[1] == top])
    if root in paths:  # a single file: its directory
        root = posixpath.dirname(root)
    if posixpath.basename(root) in SOURCE_DIRS:  # the project is the folder above src/
        root = posixpath.dirname(root)
    return "" if root in ("", "/") else root
