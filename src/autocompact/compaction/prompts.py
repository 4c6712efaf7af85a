"""The text of the summarization side query: what the model is asked to write."""

from __future__ import annotations

__all__ = [
    "LEDGER_INTRODUCTION",
    "SUMMARY_ACKNOWLEDGEMENT",
    "SUMMARY_FINAL_INSTRUCTION",
    "SUMMARY_PREAMBLE",
    "summary_system_prompt",
]

_SYSTEM_PROMPT = """\
You are the component that compresses an agent's conversation history into a structured state \
snapshot. The conversation so far will be replaced by your snapshot, so it must hold everything \
the agent needs to carry on: goals, constraints, facts learned, files and code touched, errors \
and how they were fixed, what was just done, and what comes next. Be dense and specific: keep \
file paths, function names, commands, numbers, identifiers and the user's exact requirements. \
Leave out chit-chat and anything superseded.

If the conversation begins with an earlier <state_snapshot>, do not quote it or nest it: update \
it section by section. Keep what still holds, replace every fact, value or plan that changed with \
its latest version, add what is new, and drop what is finished or no longer true.

Write the snapshot in exactly this XML structure, and nothing after it:

<state_snapshot>
    <overall_goal>The user's high-level objective, in one or two sentences.</overall_goal>
    <constraints>Requirements, preferences and rules the user stated, as a list.</constraints>
    <key_knowledge>Facts, decisions and conventions learned, as a list.</key_knowledge>
    <file_system_state>Files and directories read, created, changed or deleted, with what \
matters about each.</file_system_state>
    <code_state>Key code as it now stands: signatures, data structures, snippets worth \
keeping verbatim.</code_state>
    <errors_and_fixes>Errors met, their causes and the fixes applied (or still \
open).</errors_and_fixes>
    <recent_actions>The last significant actions and their outcomes.</recent_actions>
    <current_plan>The plan, step by step, each marked [DONE], [IN PROGRESS] or \
[TODO].</current_plan>
    <next_step>The single next action to take.</next_step>
</state_snapshot>
"""

SUMMARY_FINAL_INSTRUCTION = (
    "Write the <state_snapshot> for the conversation above now. Do not call any tools."
)

SUMMARY_PREAMBLE = (
    "This session continues an earlier conversation that was compacted to save context. "
    "Its state so far:\n\n"
)

SUMMARY_ACKNOWLEDGEMENT = "Got it. Thanks for the additional context!"


LEDGER_INTRODUCTION = (
    "\nThe state ledger extracted from the conversation follows. Keep every constraint, "
    "preference and fact of it in your snapshot, with its exact values (they are checked, and "
    "what is missing is appended verbatim):\n"
)


def summary_system_prompt(
    instructions: str | None = None,
    *,
    target_tokens: int | None = None,
    ledger: str | None = None,
) -> str:
    """The side query's system prompt, plus the summary's target size, the state ledger
    (issue 22) and the user's extra instructions (``/compress ...``)."""
    prompt = _SYSTEM_PROMPT
    if ledger:
        prompt += LEDGER_INTRODUCTION + ledger + "\n"
    if target_tokens is not None:
        prompt += (
            f"\nKeep the snapshot under about {target_tokens:,} tokens "
            f"(about {target_tokens * 3 // 4:,} words): keep the most important facts first.\n"
        )
    if instructions and instructions.strip():
        prompt += (
            f"\nAdditional instructions from the user for this summary:\n{instructions.strip()}\n"
        )
    return prompt
