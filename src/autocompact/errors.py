"""The one exception tree of autocompact.

Every error the library raises on purpose is an :class:`AutocompactError`. Errors carry fields
(which file, which key, which provider and status) and a message that says what is wrong and
what to do about it::

    AutocompactError
    ├── ConfigError                  bad window, malformed settings, unknown provider, ...
    │   └── MissingDependencyError   an optional SDK is not installed (carries the pip hint)
    ├── ContentError                 unknown part kind, malformed message, bad history shape
    │   └── MessageTooLargeError     one message alone does not fit the window
    ├── ProviderError                anything a provider call failed with
    │   ├── ContextOverflowError     "prompt is too long": the reactive path acts on it
    │   ├── AuthenticationError
    │   ├── RateLimitError
    │   ├── ProviderTimeoutError
    │   ├── ProviderConnectionError
    │   └── MalformedResponseError
    ├── CompactionError              a compaction could not be made (see CompressionInfo.status)
    ├── SessionFileError             a saved session file is damaged or not a session
    │   └── SessionInUseError        another chat holds the session's lock
    ├── SessionStoreError            a session database is down, read-only, too new, ...
    └── TranscriptFormatError        a recorded transcript cannot be read

Provider SDK exceptions never escape an adapter: adapters convert them here, ``raise ... from``.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "AutocompactError",
    "CompactionError",
    "ConfigError",
    "ContentError",
    "ContextOverflowError",
    "MalformedResponseError",
    "MessageTooLargeError",
    "MissingDependencyError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "RateLimitError",
    "SessionFileError",
    "SessionInUseError",
    "SessionStoreError",
    "TranscriptFormatError",
]


def described(exc: BaseException) -> str:
    """``exc`` as a message shows it: its type and its text, or its type alone when its text
    is empty (``ValueError()``, httpx's timeouts), which would leave a message ending in a
    colon."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class AutocompactError(Exception):
    """Base of every error autocompact raises on purpose."""


class ConfigError(AutocompactError):
    """A configuration value is wrong: a window, a settings file, a provider name.

    Attributes:
        file: the settings file involved, if any.
        key: the dotted key or argument name involved, if any.
    """

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None) -> None:
        super().__init__(message)
        self.file = file
        self.key = key


class MissingDependencyError(ConfigError):
    """An optional dependency (a provider SDK, matplotlib) is not installed.

    Attributes:
        extra: the name of the extra that installs it, e.g. ``"anthropic"``.
    """

    def __init__(self, package: str, extra: str) -> None:
        self.package = package
        self.extra = extra
        installed = _installed_version(package)
        if installed is None:
            message = (
                f"the '{package}' package is not installed; install it with: "
                f'pip install "autocompact[{extra}]"'
            )
        else:
            # Installed but its imports failed: a version older (or newer) than the extra allows.
            wanted = _required(package, extra)
            needs = f"needs {wanted}" if wanted else "needs another version"
            message = (
                f"the '{package}' package is installed at version {installed}, which autocompact "
                f"cannot use: the {extra} extra {needs}; install it with: "
                f'pip install "{wanted or package}" (or pip install "autocompact[{extra}]")'
            )
        super().__init__(message, key=extra)


def _installed_version(package: str) -> str | None:
    """The installed version of a distribution, or None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _required(package: str, extra: str) -> str | None:
    """What autocompact's ``extra`` requires of ``package`` (e.g. ``pydantic-ai-slim>=2.64,<3``),
    read from the installed package's metadata; None when it cannot be read."""
    import re
    from importlib import metadata

    try:
        requirements = metadata.requires("autocompact") or []
    except metadata.PackageNotFoundError:
        return None
    norm = re.sub(r"[-_.]+", "-", package).lower()
    for requirement in requirements:
        spec, _, marker = requirement.partition(";")
        name = re.split(r"[\s\[<>=!~;]", spec, maxsplit=1)[0]
        if re.sub(r"[-_.]+", "-", name).lower() == norm and f'"{extra}"' in marker:
            return spec.strip().replace(" ", "")
    return None


class ContentError(AutocompactError):
    """A message, a part or a history does not have a shape the engine accepts.

    Attributes:
        index: the position of the offending message in its history, if known.
    """

    def __init__(self, message: str, *, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


class MessageTooLargeError(ContentError):
    """A single message is larger than the whole context window: nothing can make it fit.

    Attributes:
        tokens: the estimated size of that message.
        window: the context window.
    """

    def __init__(self, message: str, *, index: int | None, tokens: int, window: int) -> None:
        super().__init__(message, index=index)
        self.tokens = tokens
        self.window = window


class ProviderError(AutocompactError):
    """A provider call failed.

    Attributes:
        provider: the provider's name (``"openai"``, ``"anthropic"``, ...).
        model: the model the request was for.
        status: the HTTP status, when there was one.
        retryable: whether the same request may succeed later.
    """

    default_retryable = False

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        status: int | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.status = status
        self.retryable = self.default_retryable if retryable is None else retryable

    def __str__(self) -> str:
        base = super().__str__()
        where = ", ".join(
            part
            for part in (
                self.provider and f"provider {self.provider}",
                self.model and f"model {self.model}",
                self.status is not None and f"status {self.status}",
            )
            if part
        )
        return f"{base} ({where})" if where else base


class ContextOverflowError(ProviderError):
    """The provider rejected the request as longer than the model's context window.

    Attributes:
        context_window: the window the server stated in its error (llama.cpp's ``n_ctx``,
            "exceed context window of 8192"), when it stated one.
        prompt_tokens: the request's size by the server's own count, when it stated one.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        status: int | None = None,
        retryable: bool | None = None,
        context_window: int | None = None,
        prompt_tokens: int | None = None,
    ) -> None:
        super().__init__(
            message, provider=provider, model=model, status=status, retryable=retryable
        )
        self.context_window = context_window
        self.prompt_tokens = prompt_tokens


class AuthenticationError(ProviderError):
    """The provider rejected the credentials (missing, wrong or expired API key)."""


class RateLimitError(ProviderError):
    """The provider asked us to slow down (HTTP 429 or an overloaded error)."""

    default_retryable = True


class ProviderTimeoutError(ProviderError):
    """The provider did not answer in time."""

    default_retryable = True


class ProviderConnectionError(ProviderError):
    """The provider could not be reached."""

    default_retryable = True


class MalformedResponseError(ProviderError):
    """The provider answered with something that is not a valid response."""


class CompactionError(AutocompactError):
    """A compaction could not be made; raised only where a caller asked for an exception."""


class SessionFileError(AutocompactError):
    """A saved session file cannot be read or written.

    Attributes:
        path: the file.
        line: the 1-based line number, when one line is to blame.
    """

    def __init__(self, message: str, *, path: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line
        self.detail = message


class SessionInUseError(SessionFileError):
    """Another chat (another process, or another writer) holds the session's lock."""


class SessionStoreError(AutocompactError):
    """A session store (SQLite, PostgreSQL, a JSONL directory) cannot do what was asked.

    The message says what to do. It never holds a password: ``store`` is the store's address
    with any password replaced by ``***``.

    Attributes:
        store: the store's address, redacted.
        session_id: the session involved, if any.
        reply: the model's reply (a ``Completion``) when the store failed after the model was
            paid: the turn was not saved, the reply is kept here (issue 27).
    """

    def __init__(
        self,
        message: str,
        *,
        store: str,
        session_id: str | None = None,
        reply: object | None = None,
    ) -> None:
        super().__init__(message)
        self.store = store
        self.session_id = session_id
        self.reply = reply


class TranscriptFormatError(AutocompactError):
    """A recorded transcript cannot be read.

    Attributes:
        path: the file.
        line: the 1-based line number, when one line is to blame.
    """

    def __init__(self, message: str, *, path: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


# For the adapters (not an error of the tree): what an unreadable reply raises when read.
REPLY_ERRORS: tuple[type[Exception], ...] = (
    ValueError,
    KeyError,
    TypeError,
    AttributeError,
    IndexError,  # (an SDK's stream reader on events out of order)
    AssertionError,  # (the same, on a stream that does not start as it must)
    ArithmeticError,  # (a count of 1e999)
    RecursionError,  # (a body nested past the parser's stack)
)
"""What reading a reply the adapter or its SDK cannot make sense of raises: a malformed
response, not a failure of the library."""
