"""Model limits: context window and maximum output per model, and where each number came from.

Sources, in order of precedence (:func:`resolve_limits`):

1. ``configured`` — the user set the window (settings ``model.contextWindow`` or a flag);
2. ``server`` — a local server reported it (vLLM ``/v1/models`` ``max_model_len``, Ollama
   ``/api/show``, llama.cpp ``/props``, LM Studio ``/api/v0/models``; a server of unknown kind
   is asked each way in turn);
3. ``known`` — the bundled table ``data/models.json`` (longest matching name prefix);
4. ``assumed`` — :data:`ASSUMED_CONTEXT_WINDOW`, always with a warning for ``/context``.

Standard library only: server queries use :mod:`urllib.request` and never raise (a failed query
is reported as ``None`` with the reason logged under the ``autocompact`` logger, one line per
query; :func:`ask_server_limits` gives the reason to the caller instead).
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal, TypeAlias

from autocompact.errors import ConfigError
from autocompact.jsonsafe import loads
from autocompact.thresholds import MAX_CONTEXT_WINDOW

__all__ = [
    "ASSUMED_CONTEXT_WINDOW",
    "ASSUMED_MAX_OUTPUT_TOKENS",
    "LimitsSource",
    "ModelLimits",
    "ServerKind",
    "ServerReport",
    "ask_server_limits",
    "known_limits",
    "load_model_table",
    "query_server_limits",
    "resolve_limits",
]

logger = logging.getLogger("autocompact")

LimitsSource: TypeAlias = Literal["known", "configured", "server", "assumed"]
ServerKind: TypeAlias = Literal["vllm", "ollama", "llamacpp", "lmstudio", "openai-compatible"]

ASSUMED_CONTEXT_WINDOW = 32_768
"""The window assumed for an unknown model: small on purpose, so compaction comes early."""
ASSUMED_MAX_OUTPUT_TOKENS = 4_096


@dataclass(frozen=True, kw_only=True)
class ModelLimits:
    """What is known about a model's limits.

    Attributes:
        model: the model name asked about.
        context_window: the window in tokens.
        max_output_tokens: the largest output the model may produce, when known.
        source: ``known``, ``configured``, ``server`` or ``assumed``.
        matched: the table entry or server that supplied the numbers, if any.
        warning: a notice for the user (set whenever the window is assumed).
    """

    model: str
    context_window: int
    max_output_tokens: int | None = None
    source: LimitsSource = "known"
    matched: str | None = None
    warning: str | None = None


# -- the bundled table -------------------------------------------------------------------------


@cache
def load_model_table() -> dict[str, tuple[int, int | None]]:
    """The bundled table: lower-case name prefix → (context window, max output).

    Raises:
        ConfigError: the data file is damaged (a packaging bug).
    """
    text = resources.files("autocompact").joinpath("data/models.json").read_text("utf-8")
    table: dict[str, tuple[int, int | None]] = {}
    try:
        for entry in json.loads(text)["models"]:
            window = int(entry["context_window"])
            output = entry.get("max_output_tokens")
            for prefix in entry["match"]:
                key = str(prefix).lower()
                if key in table:
                    raise ConfigError(f"models.json: prefix {key!r} is listed twice", key=key)
                table[key] = (window, int(output) if output is not None else None)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"models.json is damaged: {exc}", key="models") from exc
    return table


def _normalize(model: str) -> str:
    name = model.strip().lower()
    for prefix in ("models/",):
        name = name.removeprefix(prefix)
    return name.rsplit("/", 1)[-1]


def known_limits(model: str) -> ModelLimits | None:
    """The bundled limits of ``model`` (longest matching prefix), or ``None``."""
    name = _normalize(model)
    table = load_model_table()
    best = max((p for p in table if name.startswith(p)), key=len, default=None)
    if best is None:
        return None
    window, output = table[best]
    return ModelLimits(
        model=model, context_window=window, max_output_tokens=output, source="known", matched=best
    )


# -- local servers -----------------------------------------------------------------------------


def _root(base_url: str) -> str:
    """``http://host:port`` of a base URL such as ``http://host:port/v1``."""
    parts = urllib.parse.urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}"


def _fetch(url: str, body: dict[str, Any] | None, timeout: float) -> Any:
    import urllib.request  # here: http.client, ssl and email cost every command ~20 ms to import

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url,
        data=data,
        method="POST" if data is not None else "GET",
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return loads(response.read().decode("utf-8"))  # too deep: a ValueError


_WINDOW_FIELDS = ("max_model_len", "loaded_context_length", "context_length", "max_context_length")


def _entry_window(entry: Any) -> int | None:
    if not isinstance(entry, dict):
        return None
    for key in _WINDOW_FIELDS:
        value = entry.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    meta = entry.get("meta")
    # llama-server's meta has n_ctx_train (what the model was trained for), not the window it
    # serves: only a served n_ctx counts.
    value = meta.get("n_ctx") if isinstance(meta, dict) else None
    return value if isinstance(value, int) and value > 0 else None


def _models(base_url: str, model: str, timeout: float) -> tuple[int, str | None] | None:
    """``/v1/models`` metadata: vLLM's ``max_model_len`` and its cousins."""
    payload = _fetch(base_url.rstrip("/") + "/models", None, timeout)
    entries = payload.get("data", []) if isinstance(payload, dict) else []
    for entry in entries:
        if isinstance(entry, dict) and entry.get("id") == model:
            window = _entry_window(entry)
            if window is not None:
                return window, None
    windows = [w for w in map(_entry_window, entries) if w is not None]
    return (windows[0], None) if len(windows) == 1 else None


def _ollama(base_url: str, model: str, timeout: float) -> tuple[int, str | None] | None:
    payload = _fetch(_root(base_url) + "/api/show", {"model": model}, timeout)
    if not isinstance(payload, dict):
        return None
    native = next(
        (
            int(v)
            for k, v in (payload.get("model_info") or {}).items()
            if k.endswith(".context_length") and isinstance(v, int)
        ),
        None,
    )
    num_ctx = None
    for line in str(payload.get("parameters") or "").splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == "num_ctx" and fields[1].isdigit():
            num_ctx = int(fields[1])
    if num_ctx is not None:
        return (min(num_ctx, native) if native else num_ctx), None
    if native is None:
        return None
    return native, (
        f"Ollama reports a {native:,}-token model context, but serves requests with its own "
        "num_ctx (OLLAMA_CONTEXT_LENGTH) unless the model sets one; if replies lose the start "
        "of the conversation, set model.contextWindow to that value"
    )


def _llamacpp(base_url: str, model: str, timeout: float) -> tuple[int, str | None] | None:
    """llama-server's ``/props`` (``llama_cpp.server`` has none: its window is learned from
    its first overflow error)."""
    payload = _fetch(_root(base_url) + "/props", None, timeout)
    settings = payload.get("default_generation_settings", {}) if isinstance(payload, dict) else {}
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    if not isinstance(n_ctx, int) and isinstance(payload, dict):
        n_ctx = payload.get("n_ctx")
    return (n_ctx, None) if isinstance(n_ctx, int) and n_ctx > 0 else None


def _lmstudio(base_url: str, model: str, timeout: float) -> tuple[int, str | None] | None:
    quoted = urllib.parse.quote(model, safe="")
    payload = _fetch(_root(base_url) + f"/api/v0/models/{quoted}", None, timeout)
    if not isinstance(payload, dict):
        return None
    for key in ("loaded_context_length", "max_context_length"):
        if isinstance(payload.get(key), int):
            return payload[key], None
    return None


def _is_window(value: object) -> bool:
    """Whether a server's reported window is one (a whole count from 1 to the largest)."""
    return (
        isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_CONTEXT_WINDOW
    )


_Query = Callable[[str, str, float], "tuple[int, str | None] | None"]
# Each way of asking, with where it asks (named in the reason a server said no window).
_PROPS = ("/props", _llamacpp)
_MODELS = ("/v1/models", _models)
_OLLAMA = ("/api/show", _ollama)
_LMSTUDIO = ("/api/v0/models", _lmstudio)
_QUERIES: dict[str, tuple[tuple[str, _Query], ...]] = {
    "vllm": (_MODELS,),
    "ollama": (_OLLAMA, _MODELS),
    "llamacpp": (_PROPS, _MODELS),
    "lmstudio": (_LMSTUDIO, _MODELS),
    # A server of unknown kind: ask where each kind says it.
    "openai-compatible": (_PROPS, _MODELS, _OLLAMA, _LMSTUDIO),
}


@dataclass(frozen=True, kw_only=True)
class ServerReport:
    """What a server said when asked for a model's window (:func:`ask_server_limits`).

    Attributes:
        limits: the window it reported (``source="server"``), or ``None`` when it said none.
        reason: when it said none, why: each place asked and its answer
            (``/props: HTTP Error 404: Not Found; /v1/models: no window``); else empty.
    """

    limits: ModelLimits | None
    reason: str = ""


def ask_server_limits(
    base_url: str, model: str, *, kind: ServerKind = "vllm", timeout: float = 2.0
) -> ServerReport:
    """Ask a local OpenAI-compatible server for the model's context window, logging nothing.

    As :func:`query_server_limits`, for a caller that says what it learned itself (the proxy
    asks again while a server says no window, and logs only what changes).

    Raises:
        ConfigError: ``kind`` is not a server kind.
    """
    queries = _QUERIES.get(kind)
    if queries is None:
        raise ConfigError(
            f"unknown server kind {kind!r}: use one of {', '.join(_QUERIES)}", key="kind"
        )
    answers: dict[str, list[str]] = {}  # answer -> where (the same answer said once)
    for where, query in queries:
        try:
            found = query(base_url, model, timeout)
        except (OSError, ValueError, urllib.error.URLError, AttributeError, TypeError) as exc:
            answers.setdefault(str(exc) or type(exc).__name__, []).append(where)
            continue
        if found is None:
            answers.setdefault("no window", []).append(where)
            continue
        if not _is_window(found[0]):
            answers.setdefault(f"{found[0]!r:.40}, which is no window", []).append(where)
            continue
        window, warning = found
        limits = ModelLimits(
            model=model,
            context_window=window,
            max_output_tokens=None,
            source="server",
            matched=f"{kind} at {base_url}",
            warning=warning,
        )
        return ServerReport(limits=limits)
    reason = "; ".join(f"{', '.join(where)}: {answer}" for answer, where in answers.items())
    return ServerReport(limits=None, reason=reason)


def query_server_limits(
    base_url: str, model: str, *, kind: ServerKind = "vllm", timeout: float = 2.0
) -> ModelLimits | None:
    """Ask a local OpenAI-compatible server for the model's context window.

    Args:
        base_url: the server's OpenAI base URL (``http://127.0.0.1:8000/v1``).
        model: the model name.
        kind: which server it is (each reports the window its own way; ``openai-compatible``
            asks every way in turn).
        timeout: seconds to wait.

    Returns:
        Limits with ``source="server"``, or ``None`` when the server did not say, or said a
        window that is none (0, negative, ``true``, past :data:`MAX_CONTEXT_WINDOW`); then one
        line at INFO level says why, naming each place asked. Never raises for network or
        format problems.
    """
    report = ask_server_limits(base_url, model, kind=kind, timeout=timeout)
    if report.limits is None:
        logger.info(
            "%s at %s did not report a context window for %s (%s)",
            kind, base_url, model, report.reason,
        )  # fmt: skip
    return report.limits


# -- resolution --------------------------------------------------------------------------------


def resolve_limits(
    model: str,
    *,
    configured_window: int | None = None,
    configured_max_output: int | None = None,
    server: ModelLimits | None = None,
    assumed_window: int = ASSUMED_CONTEXT_WINDOW,
) -> ModelLimits:
    """The limits to use for ``model``: configured, else server, else known, else assumed.

    Args:
        model: the model name.
        configured_window: the user's window (settings ``model.contextWindow``).
        configured_max_output: the user's maximum output, if set.
        server: what a local server reported (:func:`query_server_limits`).
        assumed_window: the fallback window.

    Returns:
        Limits whose ``source`` says where the window came from; an assumed window always
        carries a ``warning`` to show in ``/context``.
    """
    known = known_limits(model)
    max_output = configured_max_output or (known.max_output_tokens if known else None)
    if configured_window is not None:
        return ModelLimits(
            model=model,
            context_window=configured_window,
            max_output_tokens=max_output,
            source="configured",
            matched="settings",
        )
    if server is not None:
        return ModelLimits(
            model=model,
            context_window=server.context_window,
            max_output_tokens=max_output,
            source="server",
            matched=server.matched,
            warning=server.warning,
        )
    if known is not None:
        if configured_max_output is not None:
            return ModelLimits(
                model=model,
                context_window=known.context_window,
                max_output_tokens=configured_max_output,
                source="known",
                matched=known.matched,
            )
        return known
    return ModelLimits(
        model=model,
        context_window=assumed_window,
        max_output_tokens=configured_max_output or ASSUMED_MAX_OUTPUT_TOKENS,
        source="assumed",
        warning=(
            f"the context window of {model!r} is unknown; assuming {assumed_window:,} tokens. "
            "Set model.contextWindow in settings (or pass --window) to the real value; a local "
            "server's window is also learned from its first overflow error"
        ),
    )
