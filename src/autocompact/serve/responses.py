"""OpenAI Responses (``/v1/responses``) for the proxy: forwarded, never compacted (yet).

A request with ``previous_response_id`` keeps its history on the server: the proxy has nothing
to replace. A stateless request (the whole ``input``) is forwarded as sent too: the content
model has no reader for Responses input items yet (``autocompact.convert.openai_responses`` only
writes them), so the proxy passes it through byte for byte, including the client's own
compaction (``/v1/responses/compact``, ``compaction`` items). This module gives the endpoint its
error shapes.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["RESPONSES_ERRORS", "ResponsesErrors"]


class ResponsesErrors:
    """Error shapes of the Responses API (the same object as Chat Completions')."""

    name = "openai_responses"
    upstream = "openai"

    def error(self, status: int, kind: str, message: str) -> dict[str, Any]:
        """OpenAI's error shape."""
        return {"error": {"message": message, "type": kind, "param": None, "code": kind}}

    def stream_error(self, message: str) -> bytes:
        """A Responses ``error`` event."""
        payload = json.dumps({"type": "error", "code": "upstream_stream_error", "message": message})
        return f"event: error\ndata: {payload}\n\n".encode()


RESPONSES_ERRORS = ResponsesErrors()
