"""Real agents through ``autocompact serve``: Claude Code, Codex and aider, headless, offline.

Not part of the pytest suite (the clients are not installed by the project). Install them
outside the repository, then run this script from the repository root::

    npm install --prefix /tmp/agents @anthropic-ai/claude-code @openai/codex
    python3.11 -m venv /tmp/agents/aider-venv && /tmp/agents/aider-venv/bin/pip install aider-chat
    PYTHONPATH=src python benchmarks/real_agents.py --bin /tmp/agents/node_modules/.bin \\
        --aider /tmp/agents/aider-venv/bin/aider

It starts a scripted model server on 127.0.0.1 (``_agents_upstream.py``: Anthropic Messages,
OpenAI Responses and Chat Completions, all streamed as SSE) that counts tokens its own way
(bytes of the prompt's JSON / 3, not the engine's estimate), rejects a request over its window
with the protocol's "too long" error, signs the thinking blocks and reasoning items it writes
and rejects any that come back altered; it answers the agent with tool calls that read large
files (Claude Code's ``Bash``, after one ``Agent`` sub-agent; Codex's ``exec_command``) for
several turns, then a final text; aider is made to grow its chat by naming repository files it
then adds. ``autocompact serve`` runs in a subprocess between them with ``--context-window``
equal to the server's window; then (Claude Code, Codex) it is restarted on the same store and
the client resumes its session (``--continue``, ``exec resume --last``) for more files. For
each client it records the requests the proxy saw (from its log lines), the conversations and
the signal that named them, the tiers and actions, the compactions, whether every request the
proxy logged as substituted or compacted reached the server with a stored replacement's exact
bytes (proxy lines and server requests matched in order), whether any request reached the
server over its window or with an altered signed block, the first resumed request's action,
and the client's exit code. It prints a table and exits 1 if a client that ran failed, saw an
over-window request, an altered signed block or a replay that was not byte-identical. A client
that is not installed is reported skipped.

The control (``--no-proxy``) points the clients straight at the server: the same script then
gets requests rejected as over the window, and this script exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents_upstream import SNAPSHOT_MARK, AgentUpstream
from autocompact.serve.threaded import serve_in_thread

WINDOWS = {
    "claude-code": 120_000,
    "codex": 40_000,
    "aider": 40_000,
    "aider-anthropic": 40_000,
    "codex-own-compaction": 40_000,
}
"""The server's window per client: Claude Code's system prompt and 24 tools take ~39K tokens and
it asks for 32K of output, so it needs a larger window than Codex (~13K) before it can grow."""
RESUMABLE = ("claude-code", "codex", "codex-own-compaction")
"""Clients run a second time resuming their session, through a restarted proxy."""
_CHAT_PATHS = ("/v1/messages", "/v1/chat/completions", "/v1/responses")
LOG_LINE = re.compile(
    r"(?P<method>[A-Z]+) (?P<path>\S+) conversation=(?P<conversation>\S+) signal=(?P<signal>\S+)"
    r" tokens=(?P<tokens>\d+) tier=(?P<tier>\S+) action=(?P<action>\S+)"
    r" side_queries=(?P<side>\d+) status=(?P<status>\d+)"
)


@dataclass
class Outcome:
    """What one client run showed."""

    client: str
    version: str = "-"
    ran: bool = False
    skipped: str = ""
    exit_code: int | None = None
    proxy_lines: list[dict[str, str]] = field(default_factory=list)
    upstream_requests: int = 0
    rejected: int = 0
    summaries: int = 0
    replay_ok: bool = True
    replays: int = 0
    records: int = 0
    errors: list[str] = field(default_factory=list)
    max_tokens: int = 0
    signed: str = "-"
    resume: str = "-"

    def conversations(self) -> int:
        """The conversations the proxy told apart."""
        return len({p["conversation"] for p in self.proxy_lines if p["path"] in _CHAT_PATHS})

    def failed(self) -> bool:
        """A client that ran and saw an error, an over-window request or a replay mismatch."""
        return self.ran and bool(self.errors or self.rejected or not self.replay_ok)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_health(url: str, proc: subprocess.Popen[bytes], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"autocompact serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("autocompact serve did not answer /healthz")


def _make_files(workdir: Path, count: int, size: int) -> None:
    """Large text files the agent is told to read (different lines, so nothing dedups)."""
    for n in range(1, count + 1):
        lines = [
            f"file {n} line {i}: the quick brown fox {i * n % 97} jumps over {i % 13} lazy dogs"
            for i in range(size // 60)
        ]
        (workdir / f"big_{n}.txt").write_text("\n".join(lines) + "\n")
    (workdir / "README.md").write_text("# demo\n\nFiles big_1.txt ... are data.\n")


def _env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
    }
    env.update(extra)
    return env


def _version(cmd: list[str], env: dict[str, str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"? ({exc})"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else "?"


def _git_repo(workdir: Path, env: dict[str, str]) -> None:
    git = {
        **env,
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@b",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@b",
    }
    if (workdir / ".git").exists():
        return
    for cmd in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "files"]):
        subprocess.run(cmd, cwd=workdir, env=git, check=True, capture_output=True)


def client_commands(
    name: str,
    args: argparse.Namespace,
    base: str,
    home: Path,
    workdir: Path,
    turns: int,
    *,
    resume: str = "first",
) -> tuple[list[str], dict[str, str], list[str]] | str:
    """The client's command, environment and version command, or why it is skipped
    (``resume="resume"``: the command that continues the last session)."""
    first, last = (1, turns) if resume == "first" else (turns + 1, turns + args.resume_turns)
    prompt = (
        f"Read the files big_{first}.txt to big_{last}.txt in this directory one at a time "
        "with cat, then say done."
    )
    if name == "claude-code":
        exe = shutil.which("claude", path=args.bin)
        if not exe:
            return f"claude not found in {args.bin}"
        env = _env(
            home,
            {
                "ANTHROPIC_BASE_URL": base,
                "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-the-scripted-server",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_ERROR_REPORTING": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            },
        )
        cmd = [
            exe,
            "-p",
            prompt,
            "--model",
            "claude-sonnet-4-5",
            "--allowedTools",
            "Bash(cat:*)",
            "--output-format",
            "text",
            "--max-turns",
            str(turns + args.resume_turns + 4),
        ]
        if resume == "resume":
            cmd.append("--continue")  # the newest session in this directory
        return cmd, env, [exe, "--version"]
    if name in ("codex", "codex-own-compaction"):
        exe = shutil.which("codex", path=args.bin)
        if not exe:
            return f"codex not found in {args.bin}"
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model = "scripted"\nmodel_provider = "proxy"\n\n[model_providers.proxy]\n'
            f'name = "autocompact proxy"\nbase_url = "{base}/v1"\nenv_key = "PROXY_API_KEY"\n'
            'wire_api = "responses"\n'
        )
        if name == "codex-own-compaction":  # Codex compacts by itself well below the proxy
            text = (codex_home / "config.toml").read_text()
            own = "model_context_window = 40000\nmodel_auto_compact_token_limit = 20000\n"
            (codex_home / "config.toml").write_text(own + text)
        env = _env(home, {"CODEX_HOME": str(codex_home), "PROXY_API_KEY": "sk-fake"})
        cmd = [
            exe,
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-C",
            str(workdir),
            *(["resume", "--last"] if resume == "resume" else []),
            prompt,
        ]
        return cmd, env, [exe, "--version"]
    if name in ("aider", "aider-anthropic"):
        exe = args.aider if args.aider and Path(args.aider).exists() else None
        if not exe:
            return f"aider not found at {args.aider}"
        env = _env(
            home,
            {
                "OPENAI_API_KEY": "sk-fake",
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "AIDER_ANALYTICS_DISABLE": "true",
                "AIDER_CHECK_UPDATE": "false",
            },
        )
        if name == "aider-anthropic":  # litellm reads ANTHROPIC_BASE_URL, adds /v1/messages
            env.update(ANTHROPIC_API_KEY="sk-ant-fake", ANTHROPIC_BASE_URL=base)
            model = ["--model", "anthropic/claude-sonnet-4-5"]
        else:
            model = ["--model", "openai/scripted", "--openai-api-base", f"{base}/v1"]
        _git_repo(workdir, env)  # aider offers to add only files the repository tracks
        cmd = [
            exe,
            *model,
            "--yes-always",
            "--no-auto-commits",
            "--no-dirty-commits",
            "--no-check-update",
            "--analytics-disable",
            "--no-show-model-warnings",
            "--no-pretty",
            "--no-fancy-input",
            "--map-tokens",
            "0",
            "--edit-format",
            "whole",
            "--message",
            prompt,
        ]
        return cmd, env, [exe, "--version"]
    return f"unknown client {name}"


def check_replays(upstream: AgentUpstream, store_url: str, outcome: Outcome) -> None:
    """A request the proxy logged as ``substituted`` or ``compacted`` must reach the server with
    a stored replacement's exact bytes, and no other request may carry the scripted summary
    (except one the guarantee ``trimmed``); counts the substituted ones (proxy lines and server
    requests are matched in order: the clients here send one request at a time)."""
    from autocompact.serve.substitution import record_from_entry
    from autocompact.sessions.stores import open_store

    replacements: list[bytes] = []
    store = open_store(store_url)
    try:
        sessions = {line["conversation"] for line in outcome.proxy_lines}
        for session in sorted(sessions):
            if session == "-" or not store.exists(session):
                continue
            for entry in store.load(session).entries:
                record = record_from_entry(entry.turn_id, entry.messages)
                if record is not None:
                    replacements.append(record.replacement.strip()[1:-1].strip())
    finally:
        store.close()
    outcome.records = len(replacements)
    judge_replays(outcome, upstream.agent_bodies(), replacements)


def judge_replays(outcome: Outcome, bodies: list[bytes], replacements: list[bytes]) -> None:
    """The verdict of :func:`check_replays` on the server's agent request bodies (in order)
    and the stored replacements' inner bytes."""
    chat = [p for p in outcome.proxy_lines if p["path"] in _CHAT_PATHS]
    if len(chat) != len(bodies):  # a retried or rejected request: the order cannot be matched
        outcome.errors.append(f"{len(chat)} proxy lines for {len(bodies)} upstream requests")
        outcome.replay_ok = False
        return
    for line, raw in zip(chat, bodies, strict=True):
        carried = any(rep and rep in raw for rep in replacements)
        if line["action"] in ("substituted", "compacted") and not carried:
            outcome.replay_ok = False
            outcome.errors.append(f"a {line['action']} request lacks the stored replacement bytes")
        elif line["action"] == "substituted":
            outcome.replays += 1
        elif SNAPSHOT_MARK.encode() in raw and line["action"] != "trimmed" and not carried:
            outcome.replay_ok = False
            outcome.errors.append("a request carried the summary but no stored replacement")


def _start_proxy(
    upstream_url: str, window: int, store_url: str, log_path: Path
) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    cmd = [sys.executable, "-m", "autocompact.cli.main", "serve",
           "--upstream", f"anthropic={upstream_url}", "--upstream", f"openai={upstream_url}/v1",
           "--port", str(port), "--context-window", str(window), "--store", store_url,
           "--log-level", "info"]  # fmt: skip
    with log_path.open("wb") as log:
        proxy = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    _wait_health(base, proxy)
    return proxy, base


def _run(cmd: list[str], env: dict[str, str], workdir: Path, timeout: float, log: Path) -> str:
    """Run the client; "" or what went wrong."""
    try:
        done = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        log.write_bytes((exc.stdout or b"") + b"\n--- stderr ---\n" + (exc.stderr or b""))
        return f"timed out after {timeout} s"
    log.write_bytes(done.stdout + b"\n--- stderr ---\n" + done.stderr)
    return "" if done.returncode == 0 else f"exit code {done.returncode} (see {log})"


def _read_proxy_log(path: Path, outcome: Outcome) -> list[dict[str, str]]:
    lines = []
    for line in path.read_text(errors="replace").splitlines():
        m = LOG_LINE.search(line)
        if m:
            lines.append(m.groupdict())
        elif "unknown endpoint" in line:
            outcome.errors.append(f"the client called an endpoint the proxy lacks: {line}")
        elif "Traceback" in line or " ERROR " in line:
            outcome.errors.append(f"proxy: {line.strip()[:200]}")
    outcome.proxy_lines += lines
    return lines


def run_client(name: str, args: argparse.Namespace, root: Path) -> Outcome:
    """One client against a fresh server and proxy; then (Claude Code, Codex) the proxy
    restarted on the same store and the client resuming its session for more turns."""
    outcome = Outcome(client=name)
    turns, more = args.turns, args.resume_turns
    home, workdir = root / name / "home", root / name / "work"
    home.mkdir(parents=True)
    workdir.mkdir(parents=True)
    _make_files(workdir, turns + more, args.file_bytes)
    missing = client_commands(name, args, "http://127.0.0.1:9", home, workdir, turns)
    if isinstance(missing, str):
        outcome.skipped = missing
        return outcome
    window = args.window or WINDOWS.get(name, 60_000)
    upstream = AgentUpstream(
        window=window, turns=turns, workdir=str(workdir), subagent=name == "claude-code"
    )
    store_url = f"sqlite:///{root / name / 'serve.db'}"
    phases = ["first", "resume"] if more and name in RESUMABLE else ["first"]
    with serve_in_thread(upstream.app()) as upstream_url:
        for phase in phases:
            proxy: subprocess.Popen[bytes] | None = None
            base = upstream_url
            proxy_log = root / name / f"proxy-{phase}.log"
            if not args.no_proxy:
                proxy, base = _start_proxy(upstream_url, window, store_url, proxy_log)
            try:
                made = client_commands(name, args, base, home, workdir, turns, resume=phase)
                if isinstance(made, str):
                    outcome.skipped = made
                    return outcome
                cmd, env, version_cmd = made
                if phase == "first":
                    outcome.version = _version(version_cmd, env)
                outcome.ran = True
                if phase == "resume":
                    upstream.turns = turns + more
                error = _run(cmd, env, workdir, args.timeout, root / name / f"client-{phase}.log")
                if error:
                    outcome.errors.append(f"{phase} run: {error}")
                    outcome.exit_code = outcome.exit_code or 1
                else:
                    outcome.exit_code = outcome.exit_code or 0
            finally:
                if proxy is not None:
                    proxy.terminate()
                    proxy.wait(timeout=30)
            if proxy is not None:
                lines = [p for p in _read_proxy_log(proxy_log, outcome) if p["path"] in _CHAT_PATHS]
                if phase == "resume" and lines:
                    outcome.resume = f"{lines[0]['action']} ({lines[0]['signal']})"
        outcome.upstream_requests = len(upstream.received)
        outcome.rejected = upstream.rejected
        outcome.summaries = upstream.summaries
        outcome.max_tokens = max(upstream.counts, default=0)
        outcome.signed = f"{upstream.signed_issued} / {upstream.forged}"
        if upstream.forged:
            outcome.errors.append(f"{upstream.forged} request(s) carried an altered signed block")
        if upstream.rejected:
            outcome.errors.append(
                f"{upstream.rejected} request(s) reached the server over its window"
            )
        if not args.no_proxy:
            bad = [p for p in outcome.proxy_lines if p["action"] in ("error", "error-forwarded")]
            if bad:
                outcome.errors.append(f"{len(bad)} proxy request(s) ended in {bad[0]['action']}")
            check_replays(upstream, store_url, outcome)
        (root / name / "upstream.json").write_text(json.dumps(upstream.summary(), indent=1))
        with (root / name / "bodies.jsonl").open("wb") as out:  # what the server received
            for raw in upstream.received:
                out.write(raw.replace(b"\n", b" ") + b"\n")
    return outcome


def table(outcomes: list[Outcome]) -> str:
    """The results as a Markdown table."""
    rows = [
        "| client | version | exit | proxy requests | conversations | signals | tiers | actions | "
        "compactions (side queries) | replays byte-identical | over window at server | "
        "largest prompt | signed blocks issued / altered | resumed after restart: first request |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        if not o.ran:
            rows.append(f"| {o.client} | - | skipped: {o.skipped} | | | | | | | | | | | |")
            continue
        signals = sorted({p["signal"] for p in o.proxy_lines})
        tiers: dict[str, int] = {}
        actions: dict[str, int] = {}
        for p in o.proxy_lines:
            tiers[p["tier"]] = tiers.get(p["tier"], 0) + 1
            actions[p["action"]] = actions.get(p["action"], 0) + 1
        compactions = actions.get("compacted", 0)
        replay = f"{o.replays} of {o.replays} yes" if o.replay_ok else "NO"
        rows.append(
            f"| {o.client} | {o.version} | {o.exit_code} | {len(o.proxy_lines)} | "
            f"{o.conversations()} | "
            f"{', '.join(signals)} | {_counts(tiers)} | {_counts(actions)} | "
            f"{compactions} ({o.summaries}) | {replay} | {o.rejected} | {o.max_tokens} | "
            f"{o.signed} | {o.resume} |"
        )
    return "\n".join(rows)


def conversations(o: Outcome) -> str:
    """The conversations the proxy chose for a client: id, signal, requests, actions."""
    seen: dict[tuple[str, str], dict[str, int]] = {}
    for p in o.proxy_lines:
        if p["path"] in _CHAT_PATHS:
            actions = seen.setdefault((p["conversation"], p["signal"]), {})
            actions[p["action"]] = actions.get(p["action"], 0) + 1
    lines = [f"{o.client}: {len(seen)} conversation(s)"]
    for (conversation, signal), actions in seen.items():
        lines.append(f"  {conversation} signal={signal} {_counts(actions)}")
    return "\n".join(lines)


def _counts(counts: dict[str, int]) -> str:
    return " ".join(f"{k}:{v}" for k, v in sorted(counts.items()))


def main() -> int:
    """Run the clients; print the table; 1 when a client that ran failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--bin",
        default="/tmp/agents/node_modules/.bin",
        help="where claude and codex are installed",
    )
    parser.add_argument("--aider", default="/tmp/agents/aider-venv/bin/aider")
    parser.add_argument(
        "--clients", default="claude-code,codex,codex-own-compaction,aider,aider-anthropic"
    )
    parser.add_argument(
        "--window",
        type=int,
        help="the server's window (default: per client, "
        "from what its own system prompt and tools take)",
    )
    parser.add_argument("--turns", type=int, default=10, help="files the agent reads")
    parser.add_argument("--resume-turns", type=int, default=4,
                        help="files read after resuming (0: no resume phase)")  # fmt: skip
    parser.add_argument("--file-bytes", type=int, default=24_000, help="size of each file")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per client")
    parser.add_argument("--keep", help="keep the logs in this directory")
    parser.add_argument(
        "--no-proxy", action="store_true", help="control: the clients talk to the server directly"
    )
    args = parser.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="real-agents-"))
    root.mkdir(parents=True, exist_ok=True)
    outcomes = [run_client(name.strip(), args, root) for name in args.clients.split(",")]
    print(table(outcomes))
    for o in outcomes:
        print(conversations(o))
    for o in outcomes:
        for error in o.errors:
            print(f"{o.client}: {error}")
    print(f"logs: {root}")
    return 1 if any(o.failed() for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
