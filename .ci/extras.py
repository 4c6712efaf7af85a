"""Print what .ci/extras.sh installs for one extra: its requirements, its ``==lower`` pins, the
test files that cover it, and a key for its cached venv.

    python .ci/extras.py EXTRA requirements|lowest|tests|key|all-extras
"""

from __future__ import annotations

import hashlib
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The test files that cover each extra (relative to the repository root).
TESTS = {
    "langchain": [
        "tests/integrations/test_langchain_agent.py",
        "tests/integrations/test_langchain_convert.py",
        "tests/integrations/test_langchain_docs.py",
        "tests/integrations/test_langchain_store.py",
        "tests/integrations/test_langchain_pending_tools.py",
        "tests/integrations/test_langchain_usage.py",
        "tests/integrations/test_langchain_bad_input.py",
        "tests/integrations/test_langchain_blocks.py",
        "tests/integrations/test_langchain_tip.py",
        "tests/integrations/test_langchain_identity.py",
        "tests/integrations/test_tool_media.py",
    ],
    "pydantic-ai": [
        "tests/integrations/test_pydantic_ai.py",
        "tests/integrations/test_pydantic_ai_store.py",
        "tests/integrations/test_integrations_alike.py",
        "tests/integrations/test_pydantic_ai_window.py",
        "tests/integrations/test_pydantic_ai_history.py",
        "tests/integrations/test_pydantic_ai_tool_media.py",
        "tests/integrations/test_pydantic_ai_events.py",
    ],
    "openai-agents": [
        "tests/integrations/test_openai_agents.py",
        "tests/integrations/test_openai_agents_store.py",
        "tests/integrations/test_openai_agents_one_call.py",
        "tests/integrations/test_openai_agents_defaults.py",
        "tests/integrations/test_openai_agents_bad_items.py",
        "tests/integrations/test_openai_agents_scale.py",
        "tests/integrations/test_openai_agents_declarations.py",
        "tests/integrations/test_openai_agents_reasoning.py",
        "tests/integrations/test_openai_agents_mcp.py",
    ],
    "openai": ["tests/providers/test_openai.py", "tests/providers/test_openai_responses.py"],
    "anthropic": [
        "tests/providers/test_anthropic.py",
        "tests/providers/test_anthropic_compaction.py",
    ],
    "gemini": ["tests/providers/test_gemini.py"],
    "postgres": ["tests/stores/test_semantics.py", "tests/stores/test_async_stores.py"],
    "serve": [
        "tests/serve/test_units.py",
        "tests/serve/test_passthrough.py",
        "tests/serve/test_fastpath.py",
        "tests/serve/test_shared_state.py",
        "tests/serve/test_compaction.py",
        "tests/serve/test_real_clients.py",
        "tests/serve/test_bad_requests.py",
        "tests/serve/test_upstream_edges.py",
        "tests/serve/test_tool_media.py",
        "tests/serve/test_wire_forms.py",
        "tests/serve/test_start.py",
        "tests/serve/test_window_log.py",
        "tests/serve/test_responses_sizing.py",
        "tests/serve/test_rejections.py",
        "tests/serve/test_gate_scale.py",
    ],
}

# What the tests themselves need besides the extra (no upper pins: test tools only).
TEST_TOOLS = ["pytest>=8", "pytest-asyncio>=0.23", "hypothesis>=6.100"]
# Clients some extras' tests drive (the proxy's tests speak to it through the official SDKs),
# at the versions the project's own extras allow; not pinned to their lowest.
TEST_CLIENTS = {"serve": ["openai>=3.0,<4", "anthropic>=2.9,<3"]}


def requirements(extra: str) -> list[str]:
    """The extra's requirement strings as pyproject.toml lists them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    if extra not in extras:
        raise SystemExit(f"unknown extra {extra!r}: use one of {', '.join(TESTS)}")
    return list(extras[extra])


def lowest(extra: str) -> list[str]:
    """``name==lower`` for every requirement of the extra that has a lower bound."""
    pins = []
    for requirement in requirements(extra):
        match = re.match(r"^([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*)$", requirement)
        if match is None:
            raise SystemExit(f"cannot read the requirement {requirement!r}")
        name, _, spec = match.groups()
        lower = re.search(r">=\s*([0-9][0-9A-Za-z.]*)", spec)
        if lower:
            pins.append(f"{name}=={lower.group(1)}")
    return pins


def key(extra: str, mode: str) -> str:
    """A short key for the venv: the Python version, the extra's requirements and the mode."""
    text = "\n".join(
        [sys.version, mode, *requirements(extra), *TEST_TOOLS, *TEST_CLIENTS.get(extra, [])]
    )
    return f"{extra}-{mode}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def main(argv: list[str]) -> None:
    if argv == ["all-extras"]:
        print(" ".join(TESTS))
        return
    extra, what, *rest = argv
    if what == "requirements":
        print("\n".join([*requirements(extra), *TEST_TOOLS, *TEST_CLIENTS.get(extra, [])]))
    elif what == "lowest":
        print("\n".join(lowest(extra)))
    elif what == "tests":
        print(" ".join(TESTS[extra]))
    elif what == "key":
        print(key(extra, rest[0]))
    else:
        raise SystemExit(f"unknown request {what!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
