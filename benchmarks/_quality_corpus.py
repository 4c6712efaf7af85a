"""Generated sessions for ``quality.py``: planted items, distractors and filler, round by round.

Everything is drawn from one ``random.Random(seed)``, so a seed gives the same session every time.
A session is five (or ``rounds``) *rounds* of new turns; :func:`new_round` makes one. Two kinds:

- ``chat``: user and assistant prose only;
- ``mixed``: the same conversation with tool calls and their results between the turns (file
  reads, test runs, config dumps; about half of the part's characters).

Planted items (what a summary must carry), each in several paraphrases:

- ``constraint``: a user's rule, imperative or negated (``Leave `vendor/zlib-4471` untouched``);
- ``preference``: how the user likes the work done;
- ``fact:labelled``: ``Key: value`` / ``Key = value``;
- ``fact:prose``: an unlabelled statement (``the staging box lives in us-south-4``);
- ``multi-sentence``: a statement of two or three sentences whose value is in the last one;
- ``update``: a later value of an earlier labelled or prose fact; the earlier value is *stale*
  and must be absent from the summary once the update has been said;
- ``goal``: the session's goal, and a goal change in round 3.

Every planted value holds a number drawn without replacement from 100-9999, unique in the
session; distractors draw their numbers from the same range (other numbers), so a value is never
matched by chance. Distractors have the same shapes as the items: ``Key: value`` lines about
other things, assistant measurements (``That grep returned 4,812 matches``), user small talk with
numbers, and examples. With the filler they make up the rest of the text, so keeping everything
is impossible within the budgets measured.

The wording avoids every trigger word the summarizer before the ledger rewrite looked for
(:data:`TRIGGER_WORDS`, copied here from its keyword lists on purpose, not imported: the
benchmark must not follow the code it judges); :func:`trigger_words_in` checks it and
``quality.py`` refuses to run on a corpus that uses one.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from autocompact.content import FunctionCallPart, FunctionResponsePart, Message

T = TypeVar("T")

__all__ = ["TRIGGER_WORDS", "Planted", "SessionState", "new_round", "trigger_words_in"]

TRIGGER_WORDS = (
    # constraint words and phrases, goal words and phrases, fact leads, and the list
    "must", "never", "always", "only", "don't", "dont", "shouldn't", "cannot", "can't",
    "require", "required", "requirement", "requirements", "limit", "limits", "budget",
    "deadline", "prefer", "preference", "avoid", "under", "version", "rule", "rules",
    "mandatory", "forbidden", "do not", "should not", "at most", "at least", "no more than",
    "no later", "instead", "change of plan", "new goal", "now we want", "now we need",
    "now i want", "now i need", "actually let", "actually, let", "switch to", "switching to",
    "forget about", "scratch that", "goal is now", "from now on", "update", "updated", "note",
    "fyi", "correction", "reminder", "btw", "important", "remember", "critical", "crucial",
    "essential", "key point",
)  # fmt: skip
_TRIGGER = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in TRIGGER_WORDS) + r")\b", re.I)


def trigger_words_in(text: str) -> list[str]:
    """The trigger words and phrases ``text`` contains (whole words, any case)."""
    return [m.group(0) for m in _TRIGGER.finditer(text)]


@dataclass(frozen=True, kw_only=True)
class Planted:
    """One planted item.

    Attributes:
        kind: its type (see the module docstring).
        value: the identifying value that must be in the summary.
        sentence: the shortest sentence that states it (what a perfect summary would keep).
        round: the round (1-based) it was said in.
        stale: for an update, the earlier value it supersedes.
        superseded: the round in which a later update superseded it (``None``: never).
    """

    kind: str
    value: str
    sentence: str
    round: int
    stale: str | None = None
    superseded: int | None = None


@dataclass(kw_only=True)
class SessionState:
    """What the generator remembers between rounds of one session."""

    rng: random.Random
    kind: str
    numbers: list[int] = field(default_factory=list)
    items: list[Planted] = field(default_factory=list)
    open_facts: list[tuple[int, str]] = field(default_factory=list)  # (item index, key)
    calls: int = 0
    used: set[tuple[str, object]] = field(default_factory=set)

    def number(self) -> int:
        """A number of 100-9999 not used before in this session."""
        return self.numbers.pop()

    def fresh(self, kind: str, pool: Sequence[T]) -> T:
        """An entry of ``pool`` not drawn before for ``kind`` in this session: two items never
        share a subject, so no item reads as an update of another."""
        left = [entry for entry in pool if (kind, entry) not in self.used]
        if not left:
            raise ValueError(f"the {kind} pool is exhausted: add entries or plant fewer items")
        choice = self.rng.choice(left)
        self.used.add((kind, choice))
        return choice


def new_state(seed: int, kind: str) -> SessionState:
    """The generator's state for a fresh session of ``kind`` (``chat`` or ``mixed``)."""
    rng = random.Random(f"{kind}:{seed}")
    numbers = list(range(100, 10_000))
    rng.shuffle(numbers)
    return SessionState(rng=rng, kind=kind, numbers=numbers)


_WORDS = (
    "amber", "basalt", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo",
    "juniper", "kestrel", "lumen", "marlin", "nimbus", "onyx", "pylon", "quartz", "raven",
    "sierra", "tundra", "umber", "vesper", "willow", "zephyr",
)  # fmt: skip
_REGIONS = ("us-south", "eu-west", "ap-north", "ca-east", "sa-central", "me-south")
_KEYS = (
    ("Staging DB host", "the staging DB host", "pg-{w}-{n}.internal"),
    ("Region for the production database", "the production database region", "{r}-{n}"),
    ("Metrics endpoint", "the metrics endpoint", "https://metrics.{w}.example/{n}"),
    ("Release branch", "the release branch", "release/{w}-{n}"),
    ("Artifact bucket", "the artifact bucket", "s3://artifacts-{w}-{n}"),
    ("SMTP relay", "the SMTP relay", "smtp-{n}.{w}.example"),
    ("Importer feature flag", "the importer feature flag", "FF_{W}_{n}"),
    ("On-call alias", "the on-call alias", "oncall-{w}-{n}"),
    ("Job queue", "the job queue", "jobs.{w}.q{n}"),
    ("Cache cluster", "the cache cluster", "redis-{w}-{n}"),
    ("Docs site", "the docs site", "docs-{n}.{w}.example"),
    ("Service account", "the service account", "svc-{w}-{n}@corp.example"),
)
_AREAS = (
    "importer", "exporter", "billing", "search", "audit", "reporting", "invoicing", "sync",
    "webhook", "scheduler", "notification", "metrics", "upload", "auth",
)  # fmt: skip
_TOPICS = (
    "the exporter", "the nightly job", "the invoices", "the search index", "the audit log",
    "the thumbnails", "the billing sync", "the webhooks", "the weekly reports", "the backups",
    "the mail digests", "the metrics rollup",
)  # fmt: skip
_PROSE_FACTS = (  # (what, the statement before the value)
    ("staging box", "the staging box lives in {v}", "{r}-{n}"),
    ("nightly dumps", "we keep the nightly dumps on {v}", "/srv/dumps/{w}-{n}"),
    ("mobile gateway", "the mobile team talks to the gateway on port {v}", "{n}"),
    ("CI runners", "our CI runners sit in {v}", "{r}-{n}"),
    ("billing reports", "billing reports get mailed to {v}", "billing-{n}@{w}.example"),
    ("load balancer", "the load balancer in front of the API is {v}", "lb-{w}-{n}"),
    ("secrets", "secrets for the importer come from vault path {v}", "kv/{w}/{n}"),
    ("fixtures", "the test fixtures are generated by {v}", "tools/gen_{w}_{n}.py"),
    ("cron jobs", "the cron jobs run on {v}", "cron-{w}-{n}"),
    ("feature docs", "the feature docs are published from {v}", "docs/{w}/{n}"),
    ("lab VPN", "the VPN for the lab goes through {v}", "vpn-{n}.{w}.example"),
    ("analytics warehouse", "the analytics warehouse is {v}", "wh-{w}-{n}"),
)


def _fill(template: str, state: SessionState) -> str:
    rng = state.rng
    word = rng.choice(_WORDS)
    return template.format(
        w=word, W=word.upper(), r=rng.choice(_REGIONS), n=state.number(), v="{v}"
    )


def _ident(state: SessionState) -> str:
    return f"{state.rng.choice(_WORDS)}_{state.number()}"


Said = tuple[str, str]  # (role, sentence or sentences)


def _constraint(state: SessionState, rnd: int) -> tuple[Said, Planted]:
    rng = state.rng
    path, ms = f"vendor/{rng.choice(_WORDS)}-{state.number()}", str(state.number())
    svc = f"{rng.choice(_WORDS)}-sandbox-{state.number()}"
    area = state.fresh("constraint", _AREAS)
    schema = f"schemas/{area}-{state.number()}.json"
    options = (
        (f"Leave `{path}` untouched, it is vendored code.", path),
        (f"Nobody edits `{path}` by hand; that tree is generated.", path),
        (f"Keep every {area} query below {ms} ms, the dashboards time out past that.", ms),
        (f"No network calls from the {area} sandbox `{svc}`, none at all.", svc),
        (f"Nothing gets merged into `{path}` without a green CI run.", path),
        (f"Please leave the schema in `{schema}` alone; other teams read it.", schema),
    )
    text, value = rng.choice(options)
    return ("user", text), Planted(kind="constraint", value=value, sentence=text, round=rnd)


def _preference(state: SessionState, rnd: int) -> tuple[Said, Planted]:
    rng = state.rng
    area = state.fresh("preference", _AREAS)
    ident = _ident(state)
    options = (
        f"Name the new {area} fixtures like `{ident}`, that style reads best to me.",
        f"I like the {area} logger called `{ident}`; it is what I grep for.",
        f"Put the {area} changelog lines in the `{ident}` section, that is how I like them.",
        f"Commit messages for {area} work with the `{ident}:` prefix suit me best.",
        f"For the {area} helpers I'd go with a module named `{ident}` over a utils grab bag.",
    )
    text = rng.choice(options)
    return ("user", text), Planted(kind="preference", value=ident, sentence=text, round=rnd)


def _labelled(state: SessionState, rnd: int) -> tuple[Said, Planted, str]:
    rng = state.rng
    label, key, shape = state.fresh("labelled", _KEYS)
    value = _fill(shape, state)
    text = rng.choice(
        (f"{label}: {value}", f"{label} = {value}", f"For the record, {label}: {value}")
    )
    return ("user", text), Planted(kind="fact:labelled", value=value, sentence=text, round=rnd), key


def _prose(state: SessionState, rnd: int) -> tuple[Said, Planted, str]:
    rng = state.rng
    key, statement, shape = state.fresh("prose", _PROSE_FACTS)
    value = _fill(shape, state)
    said = statement.format(v=value)
    role = rng.choice(("user", "user", "model"))
    text = (
        rng.choice(("By the way, ", "Oh, and ", "", "For context, ")) + said + "."
        if role == "user"
        else f"I checked the deploy config: {said}."
    )
    return (
        (role, text[0].upper() + text[1:]),
        Planted(kind="fact:prose", value=value, sentence=said, round=rnd),
        f"the {key}",
    )


def _multi(state: SessionState, rnd: int) -> tuple[Said, Planted]:
    rng = state.rng
    value = f"{rng.choice(_WORDS)}-{state.number()}"
    topic = state.fresh("topic", _TOPICS)
    second = rng.choice(
        (
            "The data team looked at it yesterday and liked the overall shape.",
            "We went back and forth on it last week with the platform folks.",
            "It has been a sore point since the migration in spring.",
        )
    )
    last = rng.choice(
        (
            f"Its output goes to the bucket `{value}` and nowhere else.",
            f"Everything it writes lands in `{value}`.",
            f"It reads from the `{value}` topic, not from the database.",
        )
    )
    text = f"About {topic}. {second} {last}"
    return ("user", text), Planted(kind="multi-sentence", value=value, sentence=last, round=rnd)


def _update(state: SessionState, rnd: int) -> tuple[Said, Planted] | None:
    """A new value for an earlier fact; marks that fact superseded."""
    if not state.open_facts:
        return None
    index, key = state.open_facts.pop(state.rng.randrange(len(state.open_facts)))
    old = state.items[index]
    number = state.number()
    new = re.sub(r"\d{3,4}", str(number), old.value, count=1)
    state.items[index] = Planted(
        kind=old.kind, value=old.value, sentence=old.sentence, round=old.round, superseded=rnd
    )
    text = state.rng.choice(
        (
            f"Heads up, {key} moved: it is {new} these days.",
            f"Ops changed {key}, it is {new} from this week.",
            f"We bumped {key} to {new} this morning.",
            f"Small fix to what I said before about {key}: it is {new}.",
        )
    )
    text = text[0].upper() + text[1:]
    return ("user", text), Planted(
        kind="update", value=new, sentence=text, round=rnd, stale=old.value
    )


def _goal(state: SessionState, rnd: int, first: bool) -> tuple[Said, Planted]:
    rng = state.rng
    value = f"importer/{rng.choice(_WORDS)}_{state.number()}.py" if first else ""
    if first:
        text = rng.choice(
            (
                f"What I'd like from today: get `{value}` to accept semicolon-separated files.",
                f"Today's job is making `{value}` cope with semicolon-separated files.",
            )
        )
    else:
        for index, old in enumerate(state.items):
            if old.kind == "goal" and old.superseded is None:
                state.items[index] = Planted(
                    kind="goal",
                    value=old.value,
                    sentence=old.sentence,
                    round=old.round,
                    superseded=rnd,
                )
        value = f"/v2/reports/{rng.choice(_WORDS)}-{state.number()}"
        text = rng.choice(
            (
                f"Let's put the importer aside; the rest of the day goes to the `{value}` "
                "endpoint.",
                f"Park the importer. What matters for the rest of the week is `{value}`.",
            )
        )
    return ("user", text), Planted(kind="goal", value=value, sentence=text, round=rnd)


def _distractor(state: SessionState) -> Said:
    rng = state.rng
    n, m = state.number(), rng.randrange(2, 60)
    word = rng.choice(_WORDS)
    return rng.choice(
        (
            ("model", f"That grep returned {n} matches, most of them in comments."),
            ("model", f"The fixture file has {n} lines; I just skimmed the top."),
            ("model", f"The last local run took {n} ms on my side."),
            ("model", f"For example, a name like `{word}_{n}` would also parse fine."),
            ("model", f"Lines scanned: {n}."),
            ("model", f"The old branch `{word}-{n}` is gone from the remote already."),
            ("user", f"Lunch: {m} minutes late today, sorry."),
            ("user", f"My laptop battery is at {m} percent, I may drop off."),
            ("user", f"I have {n} unread mails after the holidays."),
            ("user", f"Coffee machine on floor {m % 9 + 1} is broken again."),
            ("user", f"The meetup had {m} people, way more than last time."),
            ("user", f"Ticket {word.upper()}-{n} is someone else's, ignore it."),
        )
    )


_FILLER_USER = (
    "Thanks, that looks reasonable so far.",
    "Okay, go ahead with that.",
    "Can you explain why the parser does it that way?",
    "Sounds good to me.",
    "Hmm, let me think about that for a second.",
    "What would you do next?",
    "Right, that matches what I saw yesterday.",
    "Could you double check the edge cases first?",
)
_FILLER_MODEL = (
    "The parser reads the header first and then walks the rows one at a time.",
    "Each row is split on the delimiter and the fields are trimmed before validation.",
    "When a field is quoted the splitter keeps the delimiter inside the quotes.",
    "I would start with the smallest failing case and widen it from there.",
    "The error handling wraps each row so one bad line does not stop the batch.",
    "That path is exercised by the integration tests but not by the unit tests.",
    "The retry logic backs off a little more on every attempt.",
    "The code is older than the rest of the module and it shows in the naming.",
    "I can refactor that part once the current change is in.",
    "There are a few places where the same helper is copied with small changes.",
    "This keeps the public interface the same while the internals move around.",
    "The tests for this module are quick, so we can run them after every edit.",
)


def _filler(state: SessionState, role: str) -> str:
    pool = _FILLER_USER if role == "user" else _FILLER_MODEL
    count = 1 if role == "user" else state.rng.randrange(2, 5)
    return " ".join(state.rng.choice(pool) for _ in range(count))


def _tool_pair(state: SessionState) -> list[Message]:
    rng = state.rng
    state.calls += 1
    cid = f"call{state.calls}"
    kind = rng.choice(("read", "test", "config"))
    if kind == "read":
        path = f"src/importer/{rng.choice(_WORDS)}.py"
        call = FunctionCallPart(id=cid, name="Read", arguments={"file_path": path})
        out = "\n".join(
            f"def step_{k}(row):\n    return row.strip().split(';')"
            for k in range(rng.randrange(4, 14))
        )
    elif kind == "test":
        call = FunctionCallPart(id=cid, name="Bash", arguments={"command": "pytest -q tests"})
        out = "\n".join(
            f"tests/test_rows.py::test_case_{k} PASSED" for k in range(rng.randrange(5, 20))
        )
    else:
        call = FunctionCallPart(id=cid, name="Bash", arguments={"command": "cat settings.toml"})
        out = "\n".join(
            f"{rng.choice(_WORDS)}_{k} = {rng.randrange(2, 99)}"
            for k in range(rng.randrange(6, 15))
        )
    return [
        Message.model(state.rng.choice(_FILLER_MODEL), call),
        Message.user(FunctionResponsePart(id=cid, name=call.name, response=out)),
    ]


ItemMaker = Callable[[SessionState, int], tuple[Said, Planted]]


def new_round(state: SessionState, rnd: int, *, turns: int = 40) -> list[Message]:
    """The turns of round ``rnd`` (1-based), with its planted items appended to ``state.items``.

    Each round plants two constraints, two preferences, two labelled and two prose facts, two
    multi-sentence statements and one update (from round 2 on, of a fact of an earlier round);
    round 1 states the goal and round 3 changes it; about 2.5 distractors and filler fill each
    turn.
    """
    rng = state.rng
    said: list[Said] = []
    for maker in (_constraint, _constraint, _preference, _preference, _multi, _multi):
        line, item = maker(state, rnd)
        said.append(line)
        state.items.append(item)
    for fact_maker in (_labelled, _labelled, _prose, _prose):
        line, item, key = fact_maker(state, rnd)
        said.append(line)
        state.items.append(item)
        state.open_facts.append((len(state.items) - 1, key))
    if rnd > 1:
        update = _update(state, rnd)
        if update is not None:
            said.append(update[0])
            state.items.append(update[1])
    rng.shuffle(said)
    if rnd in (1, 3):
        line, item = _goal(state, rnd, first=rnd == 1)
        said.insert(0 if rnd == 1 else len(said) // 2, line)
        state.items.append(item)
    slots: dict[int, list[Said]] = {}
    for position, line in enumerate(said):
        spot = 0 if position == 0 and rnd == 1 else rng.randrange(turns)
        slots.setdefault(spot, []).append(line)
    messages: list[Message] = []
    for turn in range(turns):
        user: list[str] = [_filler(state, "user")]
        model: list[str] = [_filler(state, "model")]
        for role, text in slots.get(turn, []) + [_distractor(state) for _ in range(6)]:
            side = user if role == "user" else model
            side.insert(rng.randrange(len(side) + 1), text)
        messages.append(Message.user(" ".join(user)))
        if state.kind == "mixed":
            for _ in range(rng.randrange(1, 3)):
                messages += _tool_pair(state)
        messages.append(Message.model(" ".join(model) + " " + _filler(state, "model")))
    return messages
