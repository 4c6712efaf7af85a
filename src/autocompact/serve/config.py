"""How the proxy runs: :class:`ServeConfig` (checked when made), the upstream URL of a
client's path, and an upstream URL as messages show it."""

from __future__ import annotations

import math
import os
import socket
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from autocompact.compaction.split import COMPRESSION_PRESERVE_THRESHOLD

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "LEASE_MARGIN",
    "UPSTREAM_NAMES",
    "ServeConfig",
    "shown_url",
    "target_url",
]

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
UPSTREAM_NAMES = ("openai", "anthropic")
_ENDPOINTS = ("/chat/completions", "/messages", "/responses", "/completions")
"""Paths a client adds: an upstream URL that ends with one names an endpoint, not a server."""
LEASE_MARGIN = 30.0
"""Seconds a compaction lease lasts beyond the side query's timeout by default."""


@dataclass(frozen=True, kw_only=True)
class ServeConfig:
    """How the proxy runs.

    Attributes:
        upstreams: ``{"openai": URL, "anthropic": URL}`` (one at least). A URL ending in
            ``/v1`` takes the client's path without its ``/v1``.
        store: the session store's address (``sqlite:///…``, ``postgresql://…``).
        context_window: the window of every model, in place of the model table's and the
            server's (``None``: the table's, else the server's, else the assumed one).
        max_body_bytes: the largest request body (the client's own compaction is exempt).
        timeout: seconds to wait for the upstream.
        side_query_timeout: seconds to wait for a summary.
        lease_wait: seconds to wait for another worker's compaction of the same conversation.
        lease_seconds: how long a compaction lease lasts (``None``: ``side_query_timeout`` plus
            :data:`LEASE_MARGIN` seconds, what one side query may take; a worker killed
            mid-compaction blocks its conversation's compaction this long, while its requests
            wait ``lease_wait`` and then go out trimmed under the window).
        summary_target_tokens: the summary's target size and so the side query's output cap
            (``None``: the engine's default; a small local model that runs on to its cap is
            cheaper with a small one).
        keep_share: the share of the history a compaction keeps verbatim.
    """

    upstreams: Mapping[str, str]
    store: str
    context_window: int | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    timeout: float = 600.0
    side_query_timeout: float = 300.0
    lease_wait: float = 60.0
    lease_seconds: float | None = None
    summary_target_tokens: int | None = None
    keep_share: float = COMPRESSION_PRESERVE_THRESHOLD
    owner: str = field(default_factory=lambda: f"serve-{socket.gethostname()}-{os.getpid()}")

    def __post_init__(self) -> None:
        from autocompact.errors import ConfigError

        if not self.upstreams:
            raise ConfigError("give one upstream at least: --upstream openai=URL", key="upstream")
        for name, url in self.upstreams.items():
            if name not in UPSTREAM_NAMES:
                raise ConfigError(
                    f"unknown upstream {name!r}: use openai=URL or anthropic=URL", key="upstream"
                )
            if not url.startswith(("http://", "https://")):
                raise ConfigError(
                    f"the {name} upstream {url!r} is not an http(s) URL", key="upstream"
                )
            path = url.split("?", 1)[0].rstrip("/")
            endpoint = next((e for e in _ENDPOINTS if path.endswith(e)), None)
            if endpoint is not None:
                raise ConfigError(
                    f"the {name} upstream {url!r} names an endpoint ({endpoint}): give the "
                    f"server's base URL, {url[: url.index(endpoint)]!r} (the client's path "
                    "is added to it)",
                    key="upstream",
                )
        for name in ("timeout", "side_query_timeout", "lease_wait", "lease_seconds"):
            value = getattr(self, name)
            if value is not None and not 0 < value < math.inf:  # (NaN fails both)
                flag = "--" + name.replace("_", "-")
                raise ConfigError(
                    f"{flag} must be a positive, finite number of seconds, got {value}", key=name
                )
        if self.summary_target_tokens is not None and self.summary_target_tokens < 1:
            raise ConfigError(
                f"--summary-target-tokens must be a positive count, got "
                f"{self.summary_target_tokens}",
                key="summary_target_tokens",
            )
        if not 0 <= self.keep_share < 1:
            raise ConfigError(
                f"--keep-share must be in [0, 1), got {self.keep_share}", key="keep_share"
            )

    @property
    def lease_length(self) -> float:
        """How long a compaction lease lasts (see ``lease_seconds``)."""
        if self.lease_seconds is not None:
            return self.lease_seconds
        return self.side_query_timeout + LEASE_MARGIN


def target_url(base: str, path: str, query: str = "") -> str:
    """The upstream URL for a client path (``/v1`` not repeated)."""
    base = base.rstrip("/")
    if base.endswith("/v1") and path.startswith("/v1/"):
        path = path[3:]
    return base + path + (f"?{query}" if query else "")


def shown_url(url: str) -> str:
    """``url`` as a message or the log shows it: no user name, password, query or fragment."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))
