"""Benchmarks of issue 25: a history the engine has never seen, printed as Markdown.

    .venv/bin/python benchmarks/fresh.py             # full run: 1M (and 4M restore), 7 rounds
    .venv/bin/python benchmarks/fresh.py --quick     # smoke run: 100K (and 400K), 3 rounds
    .venv/bin/python benchmarks/fresh.py --report-only   # exit 0 even when a target is missed

Sections (a system prompt and 15 tool declarations on both sides wherever an estimate is
compared):

(1) *A fresh history from plain dicts*: autocompact builds its messages inside the timed part
    (``history_from_dicts`` on the neutral dicts, then ``estimate_prompt_tokens`` with the system
    prompt and tools); LangChain runs ``convert_to_messages`` on the same history as OpenAI chat
    dicts, then ``count_tokens_approximately(tools=...)``; tiktoken ``o200k_base`` encodes the
    same text (prepared untimed, which favours it).
(2) *A session over such a history and its first estimate* against ``json.loads`` of the same
    history's JSON (the cost of merely reading it): from the session file (``SessionStore.open``
    + ``ChatSession`` + ``estimate_tokens``) and from plain dicts (``history_from_dicts`` +
    ``ChatSession`` + ``estimate_tokens``).
(3) *The function API with tools*: ``estimate_prompt_tokens(..., tools=...)`` cold on a 10K
    history whose messages are already measured, against ``count_tokens_approximately`` with the
    same tools.
(4) *Compaction*: ``clear_tool_outputs`` and an offline ``CompressionService.compress(force=
    True)`` (the side query answered at once by a canned provider) on the largest history.
(5) *The command line*: ``autocompact --help`` and ``autocompact replay`` per 1,000 recorded
    calls, start included (subprocesses; the best of several runs, wall and CPU).

Times are CPU time (``time.process_time``) per run; ratios are medians of same-round ratios
(``_timing.py``): the machines these run on are shared and loaded, and CPU time charges a
contender only its own work. Wall times are printed beside. It exits 1 when a target of
issue 25 is missed, so it can gate a release; ``--report-only`` only reports.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _engine import CannedProvider
from _history import DATA_DIR, build_history, load_pool, to_langchain, to_texts
from _timing import Contender, Report, fmt_ratio, fmt_time, median_ratio, rounds
from autocompact.codec import history_from_dicts
from autocompact.content import Message, json_form
from restore import SYSTEM, TOOLS

TOOLS_15 = TOOLS[:15]
ROOT = Path(__file__).resolve().parents[1]

TARGETS = {
    "fresh_vs_langchain": 3.0,  # ≥
    "fresh_vs_tiktoken": 20.0,  # ≥
    "restore_over_loads": 2.0,  # ≤
    "function_api_vs_langchain": 5.0,  # ≥
    "clearing_ms": 5.0,  # ≤
    "compaction_ms": 15.0,  # ≤
    "help_s": 0.15,  # ≤
    "replay_s_per_1000": 0.5,  # ≤
}


def _lc_tools() -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": t.as_json() | {"parameters": dict(t.parameters)}}
        for t in TOOLS_15
    ]


def _cpu_table(
    report: Report,
    label: str,
    names: list[tuple[str, str]],
    cpu: dict[str, list[float]],
    wall: dict[str, list[float]],
    base: str,
) -> None:
    rows = []
    for name, text in names:
        rows.append(
            [
                text,
                fmt_time(statistics.median(cpu[name])),
                fmt_time(min(cpu[name])),
                fmt_time(statistics.median(wall[name])),
                "–" if name == base else fmt_ratio(median_ratio(cpu[name], cpu[base])),
            ]
        )
    report.heading(label)
    report.table(
        ["contender", "CPU (median)", "CPU (best)", "wall (median)", f"{base} faster by (CPU)"],
        rows,
    )


def section_fresh(report: Report, tokens: int, n_rounds: int) -> dict[str, float]:
    """(1) A fresh history from plain dicts: autocompact vs LangChain vs tiktoken."""
    from langchain_core.messages import convert_to_messages
    from langchain_core.messages.utils import count_tokens_approximately

    from _offline_tiktoken import load_o200k
    from autocompact.convert import to_openai_messages
    from autocompact.estimation import estimate_prompt_tokens

    encoding = load_o200k()
    pool, source = load_pool()
    hist = build_history(pool, tokens, source)
    # LangChain's convert_to_messages needs a content key on every message.
    openai_dicts = [
        {"content": "", **m} for m in to_openai_messages(history_from_dicts(hist.dicts), SYSTEM)
    ]
    lc_tools = _lc_tools()
    texts = [SYSTEM, *(json_form(t.as_json()) for t in TOOLS_15)]
    texts += to_texts(history_from_dicts(hist.dicts))

    def copies() -> list[dict[str, Any]]:  # fresh dicts each round: nothing cached on them
        return json.loads(json.dumps(hist.dicts))

    def ours(dicts: list[dict[str, Any]]) -> int:
        history = history_from_dicts(dicts)
        return estimate_prompt_tokens(history, None, 0, system_instruction=SYSTEM, tools=TOOLS_15)

    def theirs(dicts: list[dict[str, Any]]) -> int:
        return count_tokens_approximately(convert_to_messages(dicts), tools=lc_tools)

    contenders = [
        Contender("autocompact", ours, copies),
        Contender("langchain", theirs, lambda: json.loads(json.dumps(openai_dicts))),
        Contender(
            "tiktoken", lambda t: sum(map(len, encoding.encode_ordinary_batch(t))), lambda: texts
        ),
    ]
    cpu: dict[str, list[float]] = {}
    wall = rounds(contenders, n_rounds, cpu)
    _cpu_table(
        report,
        f"(1) A fresh history from plain dicts, {hist.tokens:,} tokens ({len(hist):,} messages,"
        f" {source})",
        [
            ("autocompact", "autocompact: history_from_dicts + estimate_prompt_tokens"),
            ("langchain", "LangChain: convert_to_messages + count_tokens_approximately"),
            ("tiktoken", "tiktoken o200k_base (text prepared untimed)"),
        ],
        cpu,
        wall,
        "autocompact",
    )
    return {
        "fresh_vs_langchain": median_ratio(cpu["langchain"], cpu["autocompact"]),
        "fresh_vs_tiktoken": median_ratio(cpu["tiktoken"], cpu["autocompact"]),
    }


def section_restore(report: Report, tokens: int, n_rounds: int) -> dict[str, float]:
    """(2) A session over a fresh history + its first estimate, against json.loads."""
    from autocompact.chat import ChatSession
    from autocompact.sessions.store import SessionStore

    pool, source = load_pool()
    hist = build_history(pool, tokens, source)
    raw = json.dumps(hist.dicts, ensure_ascii=False).encode("utf-8")
    provider = CannedProvider(hist.tokens)
    pending = Message.user("Run the tests again and fix what fails.")

    def session_estimate(history: Any) -> int:
        session = ChatSession(
            provider,
            context_window=100_000_000,
            system_instruction=SYSTEM,
            tools=TOOLS_15,
            history=history,
        )
        return session.estimate_tokens(pending)

    with tempfile.TemporaryDirectory() as root:
        store = SessionStore(Path(root))
        with store.create(
            provider="bench", model="m", context_window=100_000_000, system_instruction=SYSTEM
        ) as writer:
            writer.append_messages(history_from_dicts(hist.dicts))
            sid = writer.id
        contenders = [
            Contender("json.loads", lambda b: json.loads(b), lambda: raw),
            Contender("restore", lambda _: session_estimate(store.open(sid).history)),
            Contender(
                "from dicts",
                lambda d: session_estimate(history_from_dicts(d)),
                lambda: json.loads(raw),
            ),
        ]
        cpu: dict[str, list[float]] = {}
        wall = rounds(contenders, n_rounds, cpu)
    _cpu_table(
        report,
        f"(2) A session over a fresh history + first estimate, {hist.tokens:,} tokens"
        f" ({len(hist):,} messages, {len(raw) / 1e6:.1f} MB of JSON)",
        [
            ("json.loads", "json.loads of the history's JSON (the floor)"),
            ("restore", "SessionStore.open + ChatSession + estimate_tokens"),
            ("from dicts", "history_from_dicts + ChatSession + estimate_tokens"),
        ],
        cpu,
        wall,
        "json.loads",
    )
    over = median_ratio(cpu["restore"], cpu["json.loads"])
    dicts_over = median_ratio(cpu["from dicts"], cpu["json.loads"])
    report.line(
        f"Restore / json.loads: {over:.2f} (CPU); from dicts / json.loads: {dicts_over:.2f}."
    )
    return {"restore_over_loads": over, "dicts_over_loads": dicts_over}


def section_function_api(report: Report, n_rounds: int, ops: int) -> dict[str, float]:
    """(3) estimate_prompt_tokens with 15 tools at 10K against count_tokens_approximately."""
    from langchain_core.messages import SystemMessage
    from langchain_core.messages.utils import count_tokens_approximately

    from autocompact.estimation import estimate_prompt_tokens

    pool, source = load_pool()
    hist = build_history(pool, 10_000, source)
    seen = history_from_dicts(hist.dicts)
    estimate_prompt_tokens(seen, None, 0)  # measured once, as a running agent's history is
    lc = [SystemMessage(content=SYSTEM), *to_langchain(seen)]
    lc_tools = _lc_tools()
    pending = Message.user("Run the tests again and fix what fails.")

    def ours(_: object) -> None:
        for _i in range(ops):
            estimate_prompt_tokens(seen, pending, 0, system_instruction=SYSTEM, tools=TOOLS_15)

    def theirs(_: object) -> None:
        for _i in range(ops):
            count_tokens_approximately(lc, tools=lc_tools)

    contenders = [Contender("autocompact", ours, ops=ops), Contender("langchain", theirs, ops=ops)]
    cpu: dict[str, list[float]] = {}
    wall = rounds(contenders, n_rounds, cpu)
    _cpu_table(
        report,
        f"(3) The function API with 15 tools, {hist.tokens:,} tokens (messages already measured)",
        [
            ("autocompact", "estimate_prompt_tokens(..., system_instruction=, tools=)"),
            ("langchain", "count_tokens_approximately(..., tools=)"),
        ],
        cpu,
        wall,
        "autocompact",
    )
    return {"function_api_vs_langchain": median_ratio(cpu["langchain"], cpu["autocompact"])}


def section_compaction(report: Report, tokens: int, n_rounds: int) -> dict[str, float]:
    """(4) Clearing and an offline compaction on a measured history."""
    from autocompact.compaction import CompressionService, CompressionTrigger, CompressOptions
    from autocompact.compaction import plan as plan_module
    from autocompact.compaction.clearing import clear_tool_outputs
    from autocompact.compaction.ledger import build_ledger
    from autocompact.estimation import estimate_content_tokens

    pool, source = load_pool()
    hist = build_history(pool, tokens, source)
    seen = history_from_dicts(hist.dicts)
    estimate_content_tokens(seen)
    service = CompressionService(CannedProvider(hist.tokens))
    options = CompressOptions(
        context_window=4 * hist.tokens,
        force=True,
        last_prompt_token_count=hist.tokens,
        trigger=CompressionTrigger.MANUAL,
    )
    cleared = clear_tool_outputs(seen)
    # Where a compaction's time goes: the ledger (the facts, rules and decisions read from every
    # sentence of the part summarized, which the side query and the audit of its summary use),
    # timed on its own over the same messages the compaction hands it (caught on a first call).
    summarized: list[Any] = []

    def catch(messages: Any) -> Any:
        summarized.append(messages)
        return build_ledger(messages)

    plan_module.build_ledger = catch  # caught once, then put back
    try:
        service.compress(seen, options)
    finally:
        plan_module.build_ledger = build_ledger
    contenders = [
        Contender("clearing", lambda _: clear_tool_outputs(seen)),
        Contender("compaction", lambda _: service.compress(seen, options)),
        Contender("ledger", lambda _: build_ledger(summarized[0])),
    ]
    cpu: dict[str, list[float]] = {}
    wall = rounds(contenders, n_rounds, cpu)
    report.heading(f"(4) Compaction, {hist.tokens:,} tokens ({len(hist):,} messages)")
    report.table(
        ["step", "CPU (median)", "CPU (best)", "wall (median)"],
        [
            [
                text,
                fmt_time(statistics.median(cpu[name])),
                fmt_time(min(cpu[name])),
                fmt_time(statistics.median(wall[name])),
            ]
            for name, text in (
                ("clearing", f"clear_tool_outputs ({cleared.cleared} outputs cleared)"),
                ("compaction", "CompressionService.compress(force=True), canned side query"),
                (
                    "ledger",
                    f"  of which its ledger (build_ledger, {len(summarized[0]):,} messages)",
                ),
            )
        ],
    )
    return {
        "clearing_ms": statistics.median(cpu["clearing"]) * 1000,
        "compaction_ms": statistics.median(cpu["compaction"]) * 1000,
        "ledger_ms": statistics.median(cpu["ledger"]) * 1000,
    }


def _command() -> list[str]:
    exe = shutil.which("autocompact", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "autocompact.cli.main"]


def _run_timed(args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {done.stderr[-500:]}")
    return wall, cpu, done.stdout


def section_cli(report: Report, repeats: int) -> dict[str, float]:
    """(5) ``autocompact --help`` and replay per 1,000 calls, start included."""
    env = dict(os.environ)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    # As an installed package runs: bytecode compiled once and cached (here in a private
    # folder, so the source tree stays clean), not compiled again by every run.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "autocompact-bench-pycache")
    command = _command()
    _run_timed([*command, "--help"], env)  # warm-up: writes the bytecode cache
    help_runs = [_run_timed([*command, "--help"], env) for _ in range(repeats)]
    bare = [_run_timed([sys.executable, "-c", "pass"], env) for _ in range(repeats)]
    figures = {
        "help_s": min(c for _, c, _ in help_runs),
        "help_wall_s": min(w for w, _, _ in help_runs),
        "python_s": min(c for _, c, _ in bare),
    }
    rows = [
        ["autocompact --help", f"{figures['help_s']:.3f} s", f"{figures['help_wall_s']:.3f} s"],
        [
            "(python -c pass, the floor)",
            f"{figures['python_s']:.3f} s",
            f"{min(w for w, _, _ in bare):.3f} s",
        ],
    ]
    if DATA_DIR.is_dir():
        files = sorted(str(p) for p in DATA_DIR.rglob("*.jsonl.gz"))
        _run_timed([*command, "replay", files[0], "--json"], env)  # warm-up, as above
        replay = [
            _run_timed([*command, "replay", *files, "--window", "200000", "--json"], env)
            for _ in range(max(1, repeats // 2))
        ]
        # Its start alone: `replay --help` imports the command's modules and reads no file.
        start = [_run_timed([*command, "replay", "--help"], env) for _ in range(repeats)]
        calls = _replay_calls(replay[0][2])
        if calls:
            per = 1000 / calls
            figures["replay_s_per_1000"] = min(c for _, c, _ in replay) * per
            figures["replay_start_s"] = min(c for _, c, _ in start)
            rows.append(
                [
                    f"autocompact replay ({len(files)} files, {calls} calls), per 1,000 calls",
                    f"{figures['replay_s_per_1000']:.3f} s",
                    f"{min(w for w, _, _ in replay) * per:.3f} s",
                ]
            )
            rows.append(
                [
                    "  of which its start (autocompact replay --help), per 1,000 calls",
                    f"{figures['replay_start_s'] * per:.3f} s",
                    f"{min(w for w, _, _ in start) * per:.3f} s",
                ]
            )
    report.heading("(5) The command line (best of the runs, bytecode cached)")
    report.table(["command", "CPU", "wall"], rows)
    return figures


def _replay_calls(stdout: str) -> int:
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError:
        return 0
    files = data.get("files", []) if isinstance(data, dict) else data
    total = 0
    for item in files if isinstance(files, list) else []:
        if isinstance(item, dict):
            calls = item.get("calls")
            total += calls if isinstance(calls, int) else 0
    return total


def judge(figures: dict[str, float]) -> list[tuple[str, str, bool | None]]:
    """Each target of issue 25 with its figure and verdict (``None``: not measured)."""
    checks: list[tuple[str, str, bool | None]] = []
    names = {
        "fresh_vs_langchain": "fresh history from dicts ≥ 3× LangChain",
        "fresh_vs_tiktoken": "fresh history from dicts ≥ 20× tiktoken",
        "restore_over_loads": "restore + first estimate ≤ 2× json.loads",
        "function_api_vs_langchain": "estimate_prompt_tokens with 15 tools at 10K ≥ 5× LangChain",
        "clearing_ms": "clearing ≤ 5 ms",
        "compaction_ms": "offline compaction ≤ 15 ms",
        "help_s": "autocompact --help ≤ 0.15 s",
        "replay_s_per_1000": "replay ≤ 0.5 s per 1,000 calls",
    }
    lower_is_better = {
        "restore_over_loads",
        "clearing_ms",
        "compaction_ms",
        "help_s",
        "replay_s_per_1000",
    }
    for key, text in names.items():
        value = figures.get(key)
        if value is None:
            checks.append((text, "not measured", None))
            continue
        target = TARGETS[key]
        ok = value <= target if key in lower_is_better else value >= target
        shown = f"{value:.2f}" if key in lower_is_better else fmt_ratio(value)
        checks.append((text, shown, ok))
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100K / 400K, 3 rounds")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 7, quick 3)")
    parser.add_argument("--report-only", action="store_true", help="always exit 0")
    parser.add_argument(
        "--only", default="", help="comma-separated sections to run (fresh,restore,api,compact,cli)"
    )
    args = parser.parse_args(argv)
    report = Report(print)
    n = args.rounds or (3 if args.quick else 7)
    small, large = (100_000, 400_000) if args.quick else (1_000_000, 4_000_000)
    only = {s for s in args.only.split(",") if s} or {"fresh", "restore", "api", "compact", "cli"}
    figures: dict[str, float] = {}
    steps: list[tuple[str, Callable[[], dict[str, float]]]] = [
        ("fresh", lambda: section_fresh(report, small, n)),
        ("restore", lambda: section_restore(report, small, n)),
        (
            "restore",
            lambda: {
                f"{k}_large": v for k, v in section_restore(report, large, max(3, n // 2)).items()
            },
        ),
        ("api", lambda: section_function_api(report, n, 20 if args.quick else 200)),
        ("compact", lambda: section_compaction(report, small, n)),
        ("cli", lambda: section_cli(report, 3 if args.quick else 7)),
    ]
    for name, step in steps:
        if name in only:
            figures.update(step())
    if "restore_over_loads_large" in figures:
        figures["restore_over_loads"] = max(
            figures["restore_over_loads"], figures["restore_over_loads_large"]
        )
    checks = judge(figures)
    report.heading("Targets (issue 25)")
    report.table(
        ["target", "figure", "verdict"],
        [[t, f, "–" if ok is None else "met" if ok else "NOT met"] for t, f, ok in checks],
    )
    missed = [t for t, _, ok in checks if ok is False]
    if missed and not args.report_only:
        print(f"\n{len(missed)} target(s) of issue 25 missed (--report-only to exit 0)")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
