"""Build the ledger from the part being summarized (and an earlier summary in it). Pure.

One pass collects the candidate sentences (user and assistant text, harness text left out) and
what the tools did; a second ranks the sentences once the session's word counts are known
(a word in few sentences is rare, so specific). Then, in history order:

- a statement of ``key → value`` with a specific value sets the key; a later one replaces it
  and the earlier value becomes *stale* (no kept sentence may carry it);
- a user's directive (imperative, negated, modal, limit, condition) or first-person statement
  with something specific in it is a constraint or preference; one of the same template with
  other values replaces it;
- the goal is the first message's request; an imperative that opens a later user turn, or
  that names the goal's subject, is a change of goal (:mod:`.goals`);
- other specific sentences are notes, kept when room is left;
- an assistant's first-person statement with something specific is a decision;
- a successful commit or tracker close is finished work in the status (:mod:`.status`);
- Claude Code's own summary in a user's turn is the user's words only where it quotes the
  user; the rest is the work's state, notes and facts at most (:mod:`.foreign`).

Linear in the history: each sentence is read once, and scored once.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from autocompact.compaction.ledger import foreign, tools
from autocompact.compaction.ledger.announcements import is_announcement
from autocompact.compaction.ledger.code import drop_code
from autocompact.compaction.ledger.goals import (
    NAMED_GOAL,
    best,
    code_like,
    goal_changes,
    goal_index,
    has_name,
    latest,
    names,
    request_text,
    says_again,
    subject_of,
    value_follows,
)
from autocompact.compaction.ledger.keys import KeyWords, rule_key
from autocompact.compaction.ledger.model import Entry, Ledger, merged
from autocompact.compaction.ledger.render import parse_ledger
from autocompact.compaction.ledger.scan import scan
from autocompact.compaction.ledger.sentences import sentence_list
from autocompact.compaction.ledger.statements import statements, unglued
from autocompact.compaction.ledger.status import (
    DONE,
    PROGRESS,
    finished,
    next_step,
    reply_text,
    started,
    status_entries,
)
from autocompact.compaction.ledger.subjects import Subjects
from autocompact.compaction.ledger.text import (
    GRAMMAR,
    Fact,
    carries_stale,
    content_words,
    drop_harness_blocks,
    fact_of,
    form_of,
    has_specific,
    is_harness,
    is_heading,
    norm,
    rare_count,
    specific_counts,
    specific_tokens,
    stale_tokens,
    whole_words,
)
from autocompact.content import FunctionCallPart, FunctionResponsePart, Message, TextPart

__all__ = ["build_ledger"]

_RARE_WORD = re.compile(r"[a-z][a-z'-]{2,}")
_MAX_CANDIDATE = 400
_MAX_NOTES = 400
_MAX_DECISIONS = 12
_MAX_ACTIONS = 5
# Words that say a value changed (a closed class of verbs of change and correction).
_CHANGE = re.compile(
    r"\b(?:changed|moved|bumped|switched|updated|raised|lowered|replaced|renamed|migrated|"
    r"fixed|fix|corrected|correction|anymore|no longer)\b"
)
# The same in a text in ASCII, where ``\b`` then reads a table, not the Unicode database.
_CHANGE_ASCII = re.compile(_CHANGE.pattern, re.ASCII)
_BOILERPLATE = 4  # a template said this often in one part is no item
_RECENT_GOALS = 3
_MIN_SAMPLE_CHARS = 15_000  # less user text than this cannot tell a rare word
_SAMPLE_CHARS = 300_000  # the user text read to count words, at most (about)
_FIRST_PERSON = frozenset({"I'l", "I w", "We ", "We'", "I'm", "I d", "I c", "I u", "Let"})
_MIN_CONTENT = 2  # content words a rule without anything specific needs
_ACTION_RANK = {"read": 0, "edited": 1, "written": 1, "deleted": 1}
# What every match of ``NAMED`` holds (each of its forms opens or ends with one): a text without
# any is told in one scan of a character class, without the reversed copy ``has_name`` reads.
_NAMED_HINT = re.compile(r"[\d/_@]")
_NAMED_HINT_ASCII = re.compile(r"[0-9/_@]")  # (the same, in a text in ASCII: a table)


class _Said:
    """One candidate sentence."""

    __slots__ = ("names_goal", "note", "opens_turn", "position", "rare", "specific", "text", "user")

    def __init__(
        self,
        text: str,
        position: int,
        *,
        user: bool,
        opens_turn: bool,
        specific: int,
        names_goal: bool = False,
        note: bool = False,
    ) -> None:
        self.text = text
        self.note = note  # the state of the work a summary states: a note or a fact at most
        self.position = position
        self.user = user
        self.opens_turn = opens_turn
        self.specific = specific
        self.names_goal = names_goal
        self.rare = 0


class _State:
    """What build_ledger learned so far (a plain class: a dataclass compiles its methods at
    import, and this one is only ever made empty and filled in)."""

    __slots__ = (
        "actions",
        "calls",
        "common",
        "counts",
        "done",
        "errors",
        "files",
        "goal",
        "goal_subject",
        "known",
        "last_reply",
        "last_user_line",
        "last_user_position",
        "open_errors",
        "paths",
        "position",
        "rare_limit",
        "results",
        "said",
        "seeded",
        "todo_position",
        "todos",
    )

    def __init__(self) -> None:
        self.position = 0
        self.said: list[_Said] = []
        self.goal: Entry | None = None
        self.goal_subject: re.Pattern[str] | None = None  # finds the goal's subject words
        self.seeded: Ledger | None = None
        self.files: dict[str, tuple[str, int]] = {}
        self.paths: dict[str, None] = {}  # each absolute path once, in the order first seen
        self.todos: list[tuple[str, str]] = []
        self.todo_position = 0
        self.done: list[Entry] = []  # finished and started work the tools show
        self.errors: dict[str, Entry] = {}
        self.open_errors: set[str] = set()  # the keys of those still open
        self.results: dict[str, Entry] = {}
        self.actions: list[Entry] = []
        self.last_user_line = ""
        self.last_user_position = 0
        self.counts: Counter[str] = Counter()
        self.rare_limit = -1
        self.common: set[str] = set()  # words seen more than ``rare_limit`` times
        self.known: frozenset[str] = frozenset()  # ``common`` and the words of grammar
        self.last_reply: Entry | None = None
        # Each call by id, with its command and file action (read once, when it is made).
        self.calls: dict[str, tuple[FunctionCallPart, str | None, tuple[str, str] | None]] = {}

    def tick(self) -> int:
        self.position += 1
        return self.position


def build_ledger(messages: Sequence[Message]) -> Ledger:
    """The ledger of ``messages`` (see the module docstring). Deterministic."""
    state = _State()
    _sample_counts(state, messages)
    for index, message in enumerate(messages):
        parts = message.parts
        if len(parts) == 1:  # the common case: one part, told by its kind alone
            part = parts[0]
            if isinstance(part, FunctionResponsePart):
                if message.role == "user":
                    _response(state, part)
                continue
            if isinstance(part, FunctionCallPart):
                if message.role != "user":
                    _call(state, part)
                continue
            if not isinstance(part, TextPart):
                continue  # (no text, no call, no result: nothing to read)
        if message.role == "user":
            for part in message.function_responses:
                _response(state, part)
            text = "\n".join(p.text for p in parts if isinstance(p, TextPart))
            if index == 0 and "<state_snapshot>" in text:
                state.seeded = parse_ledger(text)
                state.position = 0
                state.goal_subject = subject_of(state.seeded.goal)
                continue
            if foreign.is_foreign_summary(text):
                for own, piece in foreign.summary_sections(text):
                    _user_text(state, piece, own=own)
                continue
            _user_text(state, text)
            continue
        calls = message.function_calls
        for call in calls:
            _call(state, call)
        text = message.text.strip()
        if text:
            _assistant_text(state, text, replied=not calls)
    return _finish(state)


def _user_texts(messages: Sequence[Message]) -> list[str]:
    return [
        p.text for m in messages if m.role == "user" for p in m.parts if isinstance(p, TextPart)
    ]


def _sample_counts(state: _State, messages: Sequence[Message]) -> None:
    """Count the words of the user's text, every ``stride``-th message in a long part (at most
    about :data:`_SAMPLE_CHARS` read), and set the count at or below which a word is rare: a
    word the sample never saw, or saw at most twice in a full count. A part too short to tell
    has no rare words (``rare_limit`` -1)."""
    texts = _user_texts(messages)
    total = sum(map(len, texts))
    if total < _MIN_SAMPLE_CHARS:
        state.rare_limit = -1
        return
    stride = total // _SAMPLE_CHARS + 1
    for text in texts[::stride]:
        state.counts.update(_RARE_WORD.findall(text.lower()))
    state.rare_limit = 2 if stride == 1 else 1 if stride <= 3 else 0
    state.common = {w for w, n in state.counts.items() if n > state.rare_limit}
    state.known = GRAMMAR.union(state.common)


def _user_text(state: _State, text: str, *, own: bool = True) -> None:
    """Read what the user said (``own``), or the state of the work a summary in the user's turn
    states (not own: notes and facts at most)."""
    text = drop_code(drop_harness_blocks(text))
    if not text or text.isspace() or (own and foreign.is_summary_request(text)):
        return  # nothing said, or an agent asking for its own summary (module foreign)
    lines = statements(unglued(sentence_list(text)))
    if not lines:
        return
    marks, strong, lower_lines = scan(lines)
    opens = own
    taken = -1  # a sentence joined to the change of goal before it
    subject = state.goal_subject  # finds the goal's subject (a message naming none skips it)
    if subject is not None and subject.search(text.lower()) is None:
        subject = None
    goal = (
        goal_index(lines, lower_lines, marks, state.common)
        if own and state.goal is None and state.seeded is None
        else -1
    )
    last = -1  # the last sentence read (the next step falls back on it), and its position
    last_position = 0
    for index, line in enumerate(lines):
        if len(line) < 4 or index == taken or is_harness(line):
            continue
        state.position += 1
        position = state.position
        if not (
            opens
            or index in marks
            or index in strong
            or index == goal
            or (subject is not None and index + 1 in marks)
        ):
            # Nothing specific, no rule, no goal and no value after it: only read.
            last, last_position = index, position
            continue
        if index == goal:
            state.goal = Entry(request_text(lines, index), 100.0, position)
            state.goal_subject = subject_of(state.goal)
            opens = False
            continue
        if len(line) >= _MAX_CANDIDATE:  # the splitter read no further: end on a whole word
            line = whole_words(line, _MAX_CANDIDATE - 1)
        last, last_position = index, position
        specific = marks.get(index, 0)
        if specific and code_like(line):
            continue  # pasted code or a traceback line: not a statement
        named = subject is not None and subject.search(lower_lines[index]) is not None
        if named and not specific and marks.get(index + 1) and value_follows(line, lines, index):
            line, specific, taken = f"{line} {lines[index + 1]}", marks[index + 1], index + 1
        if not opens and is_heading(line):
            continue  # ("Pending Tasks:", "## Phase 2"): what it heads is said after it
        rare = 0
        if specific:  # a candidate whatever its words; its marks rank it
            state.said.append(
                _Said(
                    line,
                    position,
                    user=True,
                    opens_turn=opens,
                    specific=specific,
                    names_goal=named,
                    note=not own,
                )
            )
        elif opens or index in strong:
            if state.rare_limit >= 0:
                rare = rare_count(lower_lines[index], state.known)
                rare = rare if rare >= 2 else 0
            # Nothing specific: a rule or a change of goal only with words rare in the
            # session, or, in a part too short to tell, with a few words of content.
            if rare or (
                state.rare_limit < 0 and len(content_words(lower_lines[index])) >= _MIN_CONTENT
            ):
                state.said.append(
                    _Said(
                        line, position, user=True, opens_turn=opens, specific=specific, note=not own
                    )
                )
                state.said[-1].rare = rare
        opens = False
    if last >= 0:
        line = lines[last]
        state.last_user_line = whole_words(line, _MAX_CANDIDATE - 1)
        state.last_user_position = last_position


def _assistant_text(state: _State, text: str, *, replied: bool) -> None:
    lines = sentence_list(drop_code(text))
    if replied and lines:
        state.last_reply = Entry(reply_text(lines), 0.0, state.tick())
    # (A sentence ending in a colon announces what follows, a tool call or a list; one that
    # announces a step to take states nothing yet: neither is an item.)
    read = [line for line in lines if 12 <= len(line) <= 300 and line[-1] != ":"]
    for line, specific in zip(read, specific_counts(read), strict=True):
        if specific and not is_announcement(line):
            state.said.append(
                _Said(line, state.tick(), user=False, opens_turn=False, specific=specific)
            )


def _call(state: _State, call: FunctionCallPart) -> None:
    action = tools.file_action(call)
    state.calls[call.id] = (call, tools.command_of(call), action)
    if action is not None:
        verb, path = action
        if path.startswith("/"):
            state.paths[path] = None
        previous = state.files.get(path)
        if previous is not None and _ACTION_RANK[previous[0]] > _ACTION_RANK[verb]:
            verb = previous[0]  # a file edited then read is still an edited file
        state.files[path] = (verb, state.tick())
    todos = tools.todos_of(call)
    if todos is not None:
        state.todos = todos
        state.todo_position = state.tick()


def _response(state: _State, part: FunctionResponsePart) -> None:
    made = state.calls.get(part.id)
    text = tools.response_text(part.response)
    if "doesn't want to proceed" in text:  # a rejection: what the user said is user text
        _user_text(state, text)
        return
    if made is None:
        call, command = None, None
        key = tools.error_key(None, part.name)
    else:
        call, command, action = made
        key = tools.read_error_key(call, command, action)
    kind = tools.kind_of(command) if command else ""
    position = state.tick()
    if part.is_error:
        line = tools.error_line(text)
        state.errors[key] = Entry(
            f"{tools.brief(call, part.name)} failed: {line}", 60.0, position, key, kind, "open"
        )
        state.open_errors.add(key)
    elif state.open_errors:  # (a fixed error stays fixed: only the open ones are read)
        keys = tools.chain_keys(command, key) if command is not None else {key}
        for old_key in list(state.open_errors):
            error = state.errors[old_key]
            if old_key in keys or (kind and error.value == kind):
                state.errors[old_key] = error._replace(mark="fixed")
                state.open_errors.discard(old_key)
    work = finished(command, text) if command is not None and not part.is_error else []
    for _, line in work:
        state.done.append(Entry(f"[{DONE}] {line}", 20.0, position, DONE, mark=DONE))
    for item in started(command) if command is not None and not part.is_error else ():
        state.done.append(Entry(f"[{PROGRESS}] {item}", 15.0, position, mark=PROGRESS))
        work.append(("", item))
    if kind and command is not None:
        line = tools.result_line(text, part.is_error)
        said = whole_words(f"{kind}: `{whole_words(command, 120)}` → {line}", 300)
        state.results[kind] = Entry(said, 50.0, position, kind)
    elif command is not None and not work:
        state.actions.append(Entry(f"ran `{whole_words(command, 120)}`", 5.0, position))
        del state.actions[: -_MAX_ACTIONS * 2]


def _finish(state: _State) -> Ledger:
    seeded = state.seeded or Ledger()
    counts, rare_limit = state.counts, state.rare_limit
    facts: dict[str, Entry] = {e.key: e for e in seeded.facts}
    rules: dict[str, Entry] = {e.key or rule_key(e.text): e for e in seeded.constraints}
    goals: list[Entry] = list(seeded.goal_changes)
    notes: list[Entry] = list(seeded.notes)
    decisions: list[Entry] = list(seeded.decisions)
    stale: set[str] = set(seeded.stale)
    subjects = Subjects()
    for entry in (*seeded.facts, *seeded.constraints, *seeded.notes, *seeded.decisions):
        subjects.add(entry)
    for entry in seeded.goal_changes:
        subjects.add(entry)
    # A sentence said again (a pasted error, a repeated rule) is read once: its key words and
    # its statement form are pure functions of its text.
    key_words = KeyWords()
    by_text = {text: key_words(text) for text in dict.fromkeys(item.text for item in state.said)}
    templates_said = [by_text[item.text] for item in state.said]
    fact_forms: dict[str, Fact | None] = {}
    templates = Counter(templates_said)
    carried = (*seeded.constraints, *seeded.notes, *seeded.decisions)
    templates.update(key_words(e.text) for e in carried)
    if templates:
        common = {t for t, n in templates.items() if n >= _BOILERPLATE}
        for entry in carried:
            if key_words(entry.text) in common:
                subjects.drop(entry)  # boilerplate carried over: not kept again
    # A carried change of goal that names the goal's subject keeps its precedence (one of a
    # template said again and again is small talk that happens to name it).
    goals = [
        e._replace(mark=NAMED_GOAL)
        if names(state.goal_subject, e.text.lower()) and templates[key_words(e.text)] < _BOILERPLATE
        else e
        for e in goals
    ]
    for item, template in zip(state.said, templates_said, strict=True):
        rare = item.rare
        if item.text in fact_forms:
            fact = fact_forms[item.text]
        else:
            fact = fact_forms[item.text] = fact_of(item.text)
        is_fact = fact is not None and _specific_value(fact.value, counts, rare_limit)
        if not (
            is_fact
            or item.user
            or (item.text[:3] in _FIRST_PERSON and len(decisions) < 4 * _MAX_DECISIONS)
        ):
            continue  # an assistant's sentence that is no fact and no decision: not scored
        score = 2.0 * min(item.specific, 4) + min(rare, 4) + _value_bonus(item)
        if templates[template] >= _BOILERPLATE:
            score -= 6.0  # one template said again and again: small talk or a log line
        if fact is not None and is_fact:
            score += 3.0 if item.user else 0.0
            lower = item.text.lower()
            change = _CHANGE_ASCII if lower.isascii() else _CHANGE
            mark = "changed" if change.search(lower) else ""
            entry = Entry(item.text, score, item.position, fact.key, fact.value, mark)
            fact_words = key_words(fact.key)  # its subject: looked up, then indexed
            found = subjects.matches(entry, fact_words)
            old = facts.get(fact.key)
            if old is not None and norm(old.value) != norm(fact.value) and old not in found:
                found.append(old)
            news = [e for e in found if e.mark == "changed" and e.position > 0 and not mark]
            if news:  # in this part, a value said to have changed outranks a plain statement
                stale.update(stale_tokens(fact.value, news[-1].value or news[-1].text))
                continue
            for gone in found:
                subjects.drop(gone)
                stale.update(stale_tokens(gone.value or gone.text, fact.value))
                if gone.key and facts.get(gone.key) is gone:
                    del facts[gone.key]
            facts[fact.key] = entry
            subjects.add(entry, fact_words)
            continue
        if not item.user:  # a decision (the others were passed over above)
            decisions.append(Entry(item.text, score, item.position))
            if not subjects.outdated(decisions[-1], stale, template):
                subjects.add(decisions[-1], template)
            continue
        # Without anything specific, a sentence counts only with words rare in the session (or
        # when the part is too short to tell), and as a rule or a change of goal.
        form = form_of(item.text)
        score += 1.0 if form.negated else 0.0
        plain = not (item.specific or rare)
        turn = (item.opens_turn or item.names_goal) and not item.note
        if plain and not (form.strong or (turn and form.directive)):
            continue
        if turn and form.directive and not (form.negated or form.bounded or form.first_person):
            named = item.names_goal and templates[template] < _BOILERPLATE
            mark = NAMED_GOAL if named else ""
            score += 0.0 if plain else 2.0
            goals.append(Entry(item.text, score, item.position, mark=mark))
            subjects.add(goals[-1], template)
        elif (form.directive or form.first_person) and not item.note:
            key = rule_key(item.text, template)
            old = rules.get(key)
            if old is not None and norm(old.text) != norm(item.text):
                stale.update(stale_tokens(old.text, item.text))
            mark = "plain" if plain else ""
            rules[key] = Entry(
                item.text, score + (0.0 if plain else 2.0), item.position, key, mark=mark
            )
            if not subjects.outdated(rules[key], stale, template):
                subjects.add(rules[key], template)
        elif len(notes) < 4 * _MAX_NOTES:
            notes.append(Entry(item.text, score, item.position))
            if not subjects.outdated(notes[-1], stale, template):
                subjects.add(notes[-1], template)
    goal = state.goal or seeded.goal
    goals = [e for e in goals if not says_again(goal, e)]  # the goal said again: no change
    recent_goals = goal_changes(goals, _RECENT_GOALS)
    # A directive that opened a turn and is not a recent goal is a rule; a change of the goal
    # that newer changes replaced is gone.
    for entry in goals:
        if (
            entry not in recent_goals
            and entry.mark != NAMED_GOAL
            and id(entry) not in subjects.gone
            and has_specific(entry.text)
        ):
            key = rule_key(entry.text, by_text.get(entry.text))
            rules.setdefault(key, entry._replace(key=key))
    current = {t.lower() for e in facts.values() for t in specific_tokens(e.value)}
    stale -= current

    def fresh(entries: Sequence[Entry]) -> tuple[Entry, ...]:
        gone = subjects.gone
        return tuple(e for e in entries if id(e) not in gone and not carries_stale(e.text, stale))

    return Ledger(
        goal=goal,
        goal_changes=fresh(recent_goals),
        constraints=fresh(sorted(rules.values(), key=lambda e: e.position)),
        facts=tuple(sorted(facts.values(), key=lambda e: e.position)),
        decisions=fresh(latest(decisions, _MAX_DECISIONS)),
        status=status_entries(state.todos, state.todo_position, state.done, seeded),
        results=merged(seeded.results, state.results.values()),
        errors=merged(seeded.errors, state.errors.values()),
        files=tools.file_entries(state.files, state.paths, seeded.files),
        notes=fresh(best(notes, _MAX_NOTES)),
        actions=tuple(state.actions[-_MAX_ACTIONS:]),
        next_step=next_step(
            facts,
            state.todos,
            state.todo_position,
            state.done,
            Entry(state.last_user_line, 0.0, state.last_user_position)
            if state.last_user_line
            else None,
            state.last_reply,
        )
        or seeded.next_step,
        stale=frozenset(stale),
    )


def _value_bonus(item: _Said) -> float:
    """A statement that names something (a path, a host, an identifier: letters with digits or
    marks) outranks one that holds only a bare count, or nothing specific."""
    text = item.text
    hint = _NAMED_HINT_ASCII if text.isascii() else _NAMED_HINT
    if hint.search(text) is not None and has_name(text):
        return 3.0
    return 0.0 if item.specific else -1.0


def _specific_value(value: str, counts: Counter[str], rare_limit: int) -> bool:
    """A value worth a key: a specific token, or a few words one of which is rare."""
    if has_specific(value):
        return True
    return (
        rare_limit >= 0
        and len(value.split()) <= 6
        and any(counts.get(w, 0) <= rare_limit for w in _RARE_WORD.findall(value.lower()))
    )
