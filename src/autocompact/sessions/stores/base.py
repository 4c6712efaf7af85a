"""What every session store is: the records, the protocol, addresses and their redaction.

A store keeps sessions shared by many workers (processes, machines). A session is a list of
**entries**, each written once and never deleted:

- ``turn``: the messages of one turn (the user's message and the model's reply), appended
  once per ``turn_id``;
- ``summary``: the history a compaction left (summary plus the recent turns it kept); it
  *replaces* the entries it was computed from, which stay in the store marked
  ``replaced_by``;
- ``clear``: an empty history that replaces everything before it.

The **live** entries (``replaced_by is None``) in ``(pos, seq)`` order are the conversation a
worker sends. A turn's ``pos`` is its ``seq``; a summary's ``pos`` is the last ``seq`` it saw,
so turns appended while the side query ran come after it. The semantics (idempotent appends,
the compaction lease, the compare-and-swap commit, the shared breaker count) are written down
in ``docs/sessions.md`` and implemented once for every SQL backend in
:mod:`autocompact.sessions.stores.sql`.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from autocompact.codec import history_from_dicts, history_to_dicts
from autocompact.content import Message
from autocompact.errors import SessionStoreError
from autocompact.sessions.records import REDACTED, redact_credentials
from autocompact.textsafe import dumps, id_problem, replace_surrogates

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_MAX_TURN_BYTES",
    "MAX_SESSION_ID_CHARS",
    "AppendResult",
    "Attempt",
    "BreakerEffect",
    "CommitResult",
    "Entry",
    "EntryKind",
    "JsonDict",
    "Lease",
    "SessionListing",
    "SessionStore",
    "Snapshot",
    "StepHook",
    "check_session_id",
    "check_turn_size",
    "decode_messages",
    "encode_messages",
    "encode_userinfo",
    "is_keyword_dsn",
    "redact_address",
    "redact_text",
    "scrub",
    "takes_growth",
]

JsonDict: TypeAlias = dict[str, Any]
EntryKind: TypeAlias = Literal["turn", "summary", "clear"]
BreakerEffect: TypeAlias = Literal["reset", "add", "keep"]
"""What a committed compaction does to the breaker's count: an effective summary resets it, an
ineffective one (SPEC §10.2) adds one, a stood clearing whose summary failed may leave it."""
StepHook: TypeAlias = Callable[[str], None]
"""Called with a step name (``append:written``, ``commit:written``, ...) inside a write, before
it commits: a tracing or fault-injection point (the multi-worker test kills workers there)."""

DEFAULT_LEASE_SECONDS = 120.0
"""How long a compaction lease lasts unless renewed: longer than any side query should take."""
DEFAULT_MAX_TURN_BYTES = 16 * 1024 * 1024
"""The largest turn (its messages as JSON) a store accepts unless told otherwise."""
MAX_SESSION_ID_CHARS = 256

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One entry of a session (see the module docstring).

    Attributes:
        seq: its place in the session's write order (shared with attempts; starts at 1).
        pos: its place in the live history.
        kind: ``turn``, ``summary`` or ``clear``.
        turn_id: the idempotency key of a turn (``None`` for the others).
        messages: what it holds (a summary: the whole history the compaction left).
        usage: ``{"prompt_tokens": n, "since": m}``: the provider's count of the history up to
            this entry's user message and the tokens added after it (``None``: not counted).
        replaced_by: the seq of the summary or clear that replaced it (``None``: live).
        owner: the worker that wrote it.
        created: when, ISO 8601 UTC.
    """

    seq: int
    pos: int
    kind: EntryKind
    turn_id: str | None
    messages: tuple[Message, ...]
    usage: JsonDict | None = None
    replaced_by: int | None = None
    owner: str | None = None
    created: str = ""


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """A session as one worker read it: the live entries and the shared state.

    Attributes:
        session_id: the session.
        meta: what the session is (provider, model, window, system instruction, cwd).
        entries: the live entries, in history order.
        epoch: how many summaries and clears were committed (the compare-and-swap token).
        last_seq: the highest seq written when this was read.
        consecutive_failures: the breaker's shared count.
        calibration: the shared estimation calibration (JSON form), if any.
        usage: the last reported usage (the newest turn's), if any.
        hold_until: the breaker's shared hold (no automatic side query below this count).
        growth: the session's growth log as the last turn left it (JSON form of
            :class:`~autocompact.compaction.accounting.GrowthLog`; ``None``: none recorded).
        created, updated: ISO 8601 UTC.
    """

    session_id: str
    meta: JsonDict
    entries: tuple[Entry, ...]
    epoch: int
    last_seq: int
    consecutive_failures: int = 0
    calibration: JsonDict | None = None
    usage: JsonDict | None = None
    hold_until: int | None = None
    growth: JsonDict | None = None
    created: str = ""
    updated: str = ""

    @property
    def history(self) -> tuple[Message, ...]:
        """The live history: the messages of the live entries in order."""
        return tuple(m for e in self.entries for m in e.messages)

    @property
    def version(self) -> tuple[int, int]:
        """``(epoch, last_seq)``: the stored conversation moved when this changed."""
        return self.epoch, self.last_seq

    def appended_since(self, version: tuple[int, int]) -> tuple[Message, ...] | None:
        """The messages appended after an earlier ``version`` of this session, read from the
        newest entries back (O(what was appended)); ``None`` when a summary or clear replaced
        the history since (the epoch moved): then only :attr:`history` says what it is."""
        epoch, last_seq = version
        if epoch != self.epoch or last_seq > self.last_seq:
            return None
        new: list[Entry] = []
        for entry in reversed(self.entries):
            if entry.seq <= last_seq:
                break
            new.append(entry)
        return tuple(m for e in reversed(new) for m in e.messages)

    @property
    def count_base(self) -> tuple[int, int]:
        """``(last_prompt_token_count, tokens since)`` of the newest live entry (``(0, 0)``:
        not counted, take the cold estimate)."""
        if not self.entries or self.entries[-1].usage is None:
            return 0, 0
        usage = self.entries[-1].usage
        return int(usage.get("prompt_tokens", 0)), int(usage.get("since", 0))


@dataclass(frozen=True, kw_only=True)
class Lease:
    """The right to make one session's side query, until ``expires`` (store clock seconds)."""

    session_id: str
    owner: str
    token: str
    expires: float


@dataclass(frozen=True, kw_only=True)
class AppendResult:
    """Where a turn went; ``duplicate``: a turn with this id was already there (not rewritten)."""

    seq: int
    duplicate: bool


@dataclass(frozen=True, kw_only=True)
class CommitResult:
    """The outcome of a compare-and-swap commit.

    Attributes:
        committed: the summary replaced the range; ``False``: the range had changed since the
            snapshot (another worker committed, or the session was cleared): the summary was
            recorded as superseded and discarded.
        seq: the summary entry's seq (committed) or the attempt's seq (superseded).
        consecutive_failures: the breaker's count after the commit.
    """

    committed: bool
    seq: int
    consecutive_failures: int


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """One recorded compaction attempt (the breaker's count is rebuilt from these).

    Attributes:
        seq: its place in the session's write order.
        owner: the worker that made it.
        trigger, status: what asked for it and how it ended (``superseded``: a summary whose
            range had changed).
        counted: whether it added one to the breaker's count.
        reset: whether it reset the count to 0 (an effective summary).
        failures_after: the breaker's count right after it.
        epoch: the epoch it was computed from.
        summary_seq: the summary entry it committed, if any.
        info: the compaction telemetry (``CompressionInfo`` as JSON).
    """

    seq: int
    owner: str | None
    trigger: str
    status: str
    counted: bool
    failures_after: int
    reset: bool = False
    epoch: int
    summary_seq: int | None
    info: JsonDict = field(default_factory=dict)
    created: str = ""


@dataclass(frozen=True, kw_only=True)
class SessionListing:
    """A line of ``sessions list``."""

    session_id: str
    meta: JsonDict
    created: str
    updated: str
    turns: int
    compactions: int


@runtime_checkable
class SessionStore(Protocol):
    """What ``ChatSession(store=…)``, the integrations and the CLI use (every backend).

    Every write is one transaction, durable when the call returns. Errors are
    :class:`~autocompact.errors.SessionStoreError` with what to do; never a driver exception.
    """

    @property
    def address(self) -> str:
        """The store's address with any password replaced by ``***``."""
        ...

    def ensure(self, session_id: str, meta: JsonDict) -> None:
        """Create the session if it does not exist (its ``meta`` is kept from the first call)."""
        ...

    def record_model(
        self,
        session_id: str,
        *,
        provider: str,
        model: str,
        context_window: int,
        window_source: str | None = None,
    ) -> None:
        """Record that the session goes on with another model (a chat's ``/model`` switch, a
        window the server reported): its meta's provider, model, window and window source are
        replaced, the rest of it is kept."""
        ...

    def exists(self, session_id: str) -> bool:
        """Whether the session exists."""
        ...

    def load(self, session_id: str, *, after: Snapshot | None = None) -> Snapshot:
        """The live history and shared state (``after``: an earlier snapshot to extend)."""
        ...

    def append_turn(
        self,
        session_id: str,
        turn_id: str,
        messages: Sequence[Message],
        *,
        usage: JsonDict | None = None,
        calibration: JsonDict | None = None,
        owner: str | None = None,
        growth: JsonDict | None = None,
    ) -> AppendResult:
        """Append one turn once: a second append with the same ``turn_id`` changes nothing.

        ``growth``: the session's growth log after this turn (kept with the session, read back
        as :attr:`Snapshot.growth`; ``None`` leaves the stored one).
        """
        ...

    def get_turn(self, session_id: str, turn_id: str) -> Entry | None:
        """The turn stored under ``turn_id`` (live or replaced), if the store keeps turn ids."""
        ...

    def acquire_lease(self, session_id: str, owner: str, ttl: float | None = None) -> Lease | None:
        """Take the session's compaction lease, or ``None`` while another worker holds it."""
        ...

    def release_lease(self, lease: Lease) -> None:
        """Give the lease back (nothing happens when it was already lost)."""
        ...

    def commit_compaction(
        self,
        base: Snapshot,
        history: Sequence[Message],
        info: JsonDict,
        *,
        lease: Lease | None = None,
        owner: str | None = None,
        breaker: BreakerEffect = "reset",
        hold_until: int | None = None,
    ) -> CommitResult:
        """Replace the range ``base`` held by ``history`` if it is unchanged (compare-and-swap)."""
        ...

    def record_attempt(
        self,
        session_id: str,
        info: JsonDict,
        *,
        counted: bool,
        epoch: int,
        lease: Lease | None = None,
        owner: str | None = None,
        hold_until: int | None = None,
    ) -> int:
        """Record an attempt that did not commit (failed or no-op); return the breaker's count."""
        ...

    def record_outgrown(
        self,
        session_id: str,
        info: JsonDict,
        *,
        epoch: int,
        hold_until: int,
        owner: str | None = None,
    ) -> bool:
        """Record that the last compaction was outgrown (SPEC §10.2, design decision 69).

        In one write: an attempt of status ``outgrown``, one more on the breaker's count, and
        the hold set to ``hold_until`` — once per ``epoch`` (the epoch the judging worker read):
        ``False`` when a worker already recorded it for that epoch (nothing is changed).
        """
        ...

    def clear(self, session_id: str, *, owner: str | None = None) -> None:
        """Replace the whole live history by an empty one (nothing is deleted)."""
        ...

    def entries(self, session_id: str) -> tuple[Entry, ...]:
        """Every entry, replaced or live, in write order (the full original conversation)."""
        ...

    def attempts(self, session_id: str) -> tuple[Attempt, ...]:
        """Every recorded compaction attempt, in write order."""
        ...

    def list_sessions(self) -> list[SessionListing]:
        """Every session, most recently updated first."""
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...


def check_session_id(session_id: object, address: str) -> str:
    """A session id: 1–256 characters, no control characters (quotes and slashes are data)."""
    if not isinstance(session_id, str) or not session_id:
        raise SessionStoreError(
            f"a session id must be a non-empty string, not {session_id!r:.40}", store=address
        )
    if len(session_id) > MAX_SESSION_ID_CHARS:
        raise SessionStoreError(
            f"the session id is {len(session_id)} characters long; use at most "
            f"{MAX_SESSION_ID_CHARS} (a hash of a longer key works)",
            store=address,
            session_id=session_id[:40] + "…",
        )
    if (problem := id_problem(session_id)) is not None:  # issue 27: textsafe's rule
        raise SessionStoreError(
            f"the session id {problem}", store=address, session_id=replace_surrogates(session_id)
        )
    if _CONTROL.search(session_id):
        raise SessionStoreError(
            f"the session id {session_id!r:.60} contains a control character; use printable "
            "characters only",
            store=address,
            session_id=session_id,
        )
    return session_id


def check_turn_size(messages: Sequence[Message], limit: int, address: str, session_id: str) -> str:
    """The turn as stored JSON, or a clear error when it is over ``limit`` bytes."""
    payload = encode_messages(messages)
    size = len(payload.encode("utf-8"))
    if size > limit:
        raise SessionStoreError(
            f"the turn is {size / 1e6:.1f} MB, over this store's limit of {limit / 1e6:.1f} MB "
            "per turn; shorten the tool output or attachment, or open the store with a larger "
            "max_turn_bytes",
            store=address,
            session_id=session_id,
        )
    return payload


def encode_messages(messages: Sequence[Message]) -> str:
    """Messages as the JSON text a store keeps."""
    return dumps(history_to_dicts(messages))  # surrogates become U+FFFD (textsafe)


def decode_messages(text: str) -> tuple[Message, ...]:
    """The messages a store kept."""
    return tuple(history_from_dicts(json.loads(text)))


_KEYWORD_PASSWORD = re.compile(r"""(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)""", re.I)


def is_keyword_dsn(address: str) -> bool:
    """Whether ``address`` is a libpq keyword string (``host=… dbname=… password=…``)."""
    return "://" not in address and bool(
        re.match(r"\s*(host|hostaddr|dbname|user|port|password|service)\s*=", address, re.I)
    )


def encode_userinfo(address: str) -> str:
    """A ``scheme://user:password@host/…`` URL whose password holds ``@ / # ?`` unencoded, with
    the password percent-encoded (what a URL needs; the same address otherwise)."""
    scheme, sep, rest = address.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in userinfo or not any(c in userinfo for c in "@/#?"):
        return address
    user, _, password = userinfo.partition(":")
    return f"{scheme}://{user}:{quote(password, safe='')}@{host}"


def redact_address(address: str) -> tuple[str, tuple[str, ...]]:
    """``(address with its password replaced by ***, the secrets it held)``.

    Handles ``scheme://user:password@host/...`` (a password with ``@ / # ?`` unencoded too), a
    ``password=`` query parameter, and a libpq keyword string's ``password=``.
    """
    if is_keyword_dsn(address):
        found = [m.group(2) for m in _KEYWORD_PASSWORD.finditer(address) if m.group(2)]
        hidden = [*found, *(f.strip("'") for f in found)]
        shown = _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + "***", address)
        return shown, tuple(s for s in hidden if s)
    address = encode_userinfo(address)
    parts = urlsplit(address)
    if not parts.password and "password" not in parts.query.lower():
        return address, ()
    secrets: list[str] = []
    netloc = parts.netloc
    if parts.password:
        secrets.extend((parts.password, unquote(parts.password)))
        userinfo, _, hostinfo = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{hostinfo}"
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(k.lower() == "password" for k, _ in query):
        secrets.extend(v for k, v in query if k.lower() == "password" and v)
        secrets.extend(quote(v) for k, v in query if k.lower() == "password" and v)
        query = [(k, "***" if k.lower() == "password" else v) for k, v in query]
    redacted = urlunsplit(
        (parts.scheme, netloc, parts.path, urlencode(query, safe="*/"), parts.fragment)
    )
    return redacted, tuple(s for s in secrets if s)


def redact_text(text: str, secrets: Sequence[str]) -> str:
    """``text`` as every store keeps it, the session files' policy (``records.encode_record``):
    well-known credential shapes and each of ``secrets`` (plain or JSON-escaped; see
    :func:`~autocompact.sessions.records.secrets_to_redact`) replaced by ``[redacted]``."""
    text = redact_credentials(text)
    for secret in secrets:
        text = text.replace(secret, REDACTED)
        escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
        if escaped != secret:
            text = text.replace(escaped, REDACTED)
    return text


def scrub(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def takes_growth(append_turn: Callable[..., Any]) -> bool:
    """Whether a store's ``append_turn`` takes ``growth=`` (a store written before it does not:
    the session then keeps its growth log in memory only)."""
    try:
        parameters = inspect.signature(append_turn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "growth" or p.kind is p.VAR_KEYWORD for p in parameters)
