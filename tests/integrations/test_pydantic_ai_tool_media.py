"""pydantic-ai: what a tool returns is counted as pydantic-ai sends it (each test failed on the
code before its fix)."""

from __future__ import annotations

import base64
import random
from typing import Any

from pydantic_ai import messages as pm

from autocompact.estimation import estimate_prompt_tokens
from autocompact.integrations.pydantic_ai import to_autocompact

DATA = random.Random(11).randbytes(300_000)  # a 300 KB screenshot
B64 = base64.b64encode(DATA).decode()


def tool_history(content: Any) -> list[pm.ModelMessage]:
    """A prompt, a call of ``screenshot`` and its return holding ``content``."""
    return [
        pm.ModelRequest(parts=[pm.UserPromptPart("Check the login page.")]),
        pm.ModelResponse(parts=[pm.ToolCallPart("screenshot", {}, tool_call_id="c1")]),
        pm.ModelRequest(parts=[pm.ToolReturnPart("screenshot", content, tool_call_id="c1")]),
    ]


def estimate(history: list[pm.ModelMessage]) -> int:
    return estimate_prompt_tokens(to_autocompact(history).messages, None, 0)


# -- a tool's own dicts shaped like an image block ---------------------------------------------


def test_a_tools_own_image_shaped_dicts_count_as_the_text_pydantic_ai_sends() -> None:
    """A tool returning plain dicts in LangChain's image shape: pydantic-ai sends them as their
    JSON text (no model reads them as an image), so they count as that text, not as one image."""
    block = {"type": "image", "base64": B64, "mime_type": "image/png"}
    part = pm.ToolReturnPart("screenshot", [block], tool_call_id="c1")
    (sent,) = part.content_items(mode="str")  # what pydantic-ai's models send: text
    assert isinstance(sent, str)
    assert B64 in sent
    assert estimate(tool_history([block])) > len(B64) // 3  # not about one image
