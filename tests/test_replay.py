"""Replay: estimation rows, the ladder and legacy policies on synthetic growth, the real sessions,
and the ``autocompact replay`` command."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from autocompact.cli import main as cli_main
from autocompact.cli.replay_cmd import render_chart, write_plot
from autocompact.content import Message
from autocompact.errors import ConfigError, MissingDependencyError
from autocompact.estimation import estimate_content_tokens
from autocompact.replay import (
    ReplayOptions,
    iter_rows,
    replay,
    simulate_policy,
    summarize_errors,
)
from autocompact.thresholds import DEFAULT_PCT, compute_thresholds
from autocompact.transcripts import RecordedCall, Transcript, read_transcript

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "claude-code-sessions"
MAIN_SESSIONS = sorted(DATA.glob("*.jsonl.gz")) if DATA.is_dir() else []
needs_data = pytest.mark.skipif(
    not MAIN_SESSIONS, reason=f"the recorded sessions are not present at {DATA}"
)

BASELINE = 2_000
CHUNK = 8_000  # characters of each user request: 2,000 tokens by the plain counter
WINDOW = 64_000  # auto = hard = 44,800 (collapsed); legacy fires at 70 % = 44,800 too


def synthetic(calls: int = 40) -> Transcript:
    """A session growing ~2,002 tokens a call; the provider counts exactly the plain estimate."""
    messages: list[Message] = []
    recorded = []
    for i in range(calls):
        messages.append(Message.user(f"request {i}\n" + "x" * CHUNK))
        recorded.append(
            RecordedCall(
                index=i,
                preceding=len(messages),
                context_start=0,
                prompt_tokens=BASELINE + estimate_content_tokens(messages),
            )
        )
        messages.append(Message.model(f"done {i}"))
    return Transcript(
        path="synthetic", format="openai-json", messages=tuple(messages), calls=tuple(recorded)
    )


class Scripted:
    """A summarizer whose n-th answer is scripted (empty string = failure)."""

    def __init__(self, fail: Sequence[bool]) -> None:
        self.fail = list(fail)
        self.calls = 0

    def __call__(self, messages: Sequence[Message]) -> str:
        failed = self.fail[self.calls] if self.calls < len(self.fail) else self.fail[-1]
        self.calls += 1
        return "" if failed else f"summary of {len(messages)} messages"


# -- estimation ------------------------------------------------------------------------------------


def test_estimates_on_a_session_counted_exactly() -> None:
    """When the provider counts exactly the plain estimate, every estimator is exact."""
    report = replay(synthetic(10), ReplayOptions(window=WINDOW))
    assert report.baseline_tokens == BASELINE
    for row in report.rows[1:]:
        assert row.estimate_cold == row.reported
        assert abs(row.estimate_calibrated_applied - row.reported) <= 1  # rounding up: at most 1
    assert all(row.estimate_warm == row.reported for row in report.rows)
    cold = report.estimation["cold"]
    assert (cold.count, cold.mean_error, cold.within_10pct) == (9, 0.0, 1.0)


def test_calibration_raises_cold_estimates_learned_from_earlier_calls_only() -> None:
    """A tokenizer counting 1.5× the plain estimate: cold stays low, calibrated catches up
    from the second call on, learned only from calls before the one estimated."""
    base = synthetic(8)
    calls = tuple(
        RecordedCall(
            index=c.index,
            preceding=c.preceding,
            context_start=0,
            prompt_tokens=BASELINE + round(1.5 * (c.prompt_tokens - BASELINE)),
        )
        for c in base.calls
    )
    transcript = Transcript(path="x", format="openai-json", messages=base.messages, calls=calls)
    report = replay(transcript, ReplayOptions(window=200_000))
    rows = report.rows
    assert rows[1].estimate_calibrated_applied == rows[1].estimate_cold  # nothing learned yet
    errors = [(row.estimate_calibrated_applied - row.reported) / row.reported for row in rows[2:]]
    for row in rows[2:]:
        assert row.reported > row.estimate_calibrated_applied > row.estimate_cold
    assert errors == sorted(errors)  # closer with every call
    assert abs(errors[-1]) < 0.02
    assert report.calibration.factor == pytest.approx(1.5, rel=0.05)


def test_iter_rows_streams_the_report_rows() -> None:
    """iter_rows yields, one by one, the rows the full report holds."""
    transcript = synthetic(6)
    options = ReplayOptions(window=WINDOW)
    assert tuple(iter_rows(transcript, options)) == replay(transcript, options).rows


def test_chart_marks_thresholds_and_compactions() -> None:
    """The text chart draws the window/hard/auto/warn lines and a ladder compaction point."""
    report = replay(synthetic(90), ReplayOptions(window=200_000, summarizer=Scripted([False])))
    lines = render_chart(report, width=40, height=12)
    assert lines[0].endswith("window 200.0K")
    assert any(line.endswith("hard 177.0K") for line in lines)
    assert any(line.endswith("auto 167.0K") for line in lines)
    assert any(line.endswith("warn 147.0K") for line in lines)
    assert any("L" in line.split("|")[1] for line in lines[:-2])
    assert len(lines) == 12 + 2


def test_summarize_errors_by_hand() -> None:
    """Mean, median, p95 and the ±10/±30 % shares on hand-made pairs."""
    pairs = [(110, 100), (90, 100), (100, 100), (140, 100), (100, 0)]
    summary = summarize_errors(pairs)
    assert summary.count == 4
    assert summary.mean_error == pytest.approx(0.1)
    assert summary.median_error == pytest.approx(0.05)
    assert summary.p95_abs_error == pytest.approx(0.4)
    assert summary.within_10pct == 0.75
    assert summary.within_30pct == 0.75
    assert summarize_errors([]).mean_error is None


# -- policies --------------------------------------------------------------------------------------


def test_legacy_after_one_failure_never_compacts_automatically_and_overflows() -> None:
    """Legacy: the first automatic attempt fails, no automatic attempt follows, requests go
    over the window, and only the reactive retry compacts."""
    summarizer = Scripted([True, False])
    transcript = synthetic()
    result = simulate_policy(
        "legacy", transcript, ReplayOptions(window=WINDOW, summarizer=summarizer)
    )
    sizes = [c.prompt_tokens for c in transcript.calls]
    # By hand: legacy checks the previous call's size against 70 % of the window.
    first_check = next(i for i in range(1, len(sizes)) if sizes[i - 1] >= DEFAULT_PCT * WINDOW)
    autos = [e for e in result.events if e.trigger == "auto"]
    assert [(e.call, e.kind) for e in autos] == [(first_check + 1, "failed")]
    first_over = next(i for i, size in enumerate(sizes) if size > WINDOW)
    oversized = [e for e in result.events if e.kind == "oversized"]
    assert oversized[0].call == first_over + 1
    assert result.oversized_requests >= 1
    assert all(e.trigger == "reactive" for e in result.events if e.kind == "compacted")
    assert result.failed_attempts == 1


def test_legacy_with_every_summary_failing_overflows_on_every_call_past_the_window() -> None:
    """With summaries always failing, legacy never compacts and every request over the window
    is one over the window: the count equals the recorded calls above it."""
    transcript = synthetic()
    result = simulate_policy("legacy", transcript, ReplayOptions(window=WINDOW, failure_rate=1.0))
    over = sum(c.prompt_tokens > WINDOW for c in transcript.calls)
    assert result.compactions == 0
    assert result.oversized_requests == over > 0
    assert result.peak_prompt_tokens == transcript.calls[-1].prompt_tokens


@pytest.mark.parametrize("seed", range(6))
def test_ladder_with_30_percent_failures_never_sends_over_the_window(seed: int) -> None:
    """The ladder (auto, breaker, hard rescue, trimming) keeps every request inside the window."""
    result = simulate_policy(
        "ladder",
        synthetic(60),
        ReplayOptions(window=WINDOW, failure_rate=0.3, seed=seed, summarizer=Scripted([False])),
    )
    assert result.oversized_requests == 0
    assert max(result.sizes) <= WINDOW
    assert result.compactions > 0


def test_ladder_compacts_at_auto_and_counts_side_queries() -> None:
    """Without failures the ladder compacts when its estimate reaches auto, one side query each."""
    transcript = synthetic()
    summarizer = Scripted([False])
    result = simulate_policy(
        "ladder", transcript, ReplayOptions(window=WINDOW, summarizer=summarizer)
    )
    auto = compute_thresholds(WINDOW).auto
    first = next(e for e in result.events if e.kind == "compacted")
    assert first.tokens_before >= auto
    assert first.tokens_after < first.tokens_before
    assert result.failed_attempts == 0
    assert result.side_queries == summarizer.calls == result.compactions
    assert result.mean_fill_at_compaction is not None
    assert result.mean_fill_at_compaction >= auto / WINDOW


def test_failures_are_seeded() -> None:
    """The same seed gives the same run; the options refuse a rate outside 0..1."""
    options = ReplayOptions(window=WINDOW, failure_rate=0.5, seed=7, summarizer=Scripted([False]))
    one = simulate_policy("ladder", synthetic(), options)
    two = simulate_policy("ladder", synthetic(), options)
    assert one == two
    with pytest.raises(ConfigError, match="failure rate"):
        ReplayOptions(window=WINDOW, failure_rate=1.5)


# -- the real sessions -----------------------------------------------------------------------------


def independent_prompt_sizes(path: Path) -> list[int]:
    """Per API call: input + cache creation + cache read, each message.id counted once."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        lines = [json.loads(line) for line in handle if line.strip()]
    sizes: dict[str, int] = {}
    for line in lines:
        if line.get("type") != "assistant" or line.get("isSidechain"):
            continue
        message = line["message"]
        usage = message["usage"]
        sizes.setdefault(
            message["id"],
            usage["input_tokens"]
            + usage["cache_creation_input_tokens"]
            + usage["cache_read_input_tokens"],
        )
    return list(sizes.values())


@needs_data
@pytest.mark.parametrize("path", MAIN_SESSIONS, ids=lambda p: p.name[:12])
def test_real_sessions_reported_sizes_match_the_files(path: Path) -> None:
    """The sizes replay reads are the files' own usage sums, one per message.id."""
    report = replay(read_transcript(path), ReplayOptions(window=200_000))
    assert [row.reported for row in report.rows] == independent_prompt_sizes(path)
    assert report.policies["ladder"].oversized_requests == 0


@needs_data
def test_real_sessions_known_shapes() -> None:
    """The two long sessions: 152 and 139 calls, each with one recorded automatic compaction."""
    by_calls = {}
    for path in MAIN_SESSIONS:
        transcript = read_transcript(path)
        by_calls[len(transcript.calls)] = transcript
    for calls, pre in ((152, 167_094), (139, 170_251)):
        (marker,) = by_calls[calls].compactions
        assert (marker.trigger, marker.pre_tokens) == ("auto", pre)


# -- the command -----------------------------------------------------------------------------------


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run main() with only the replay command registered."""
    monkeypatch.setattr(cli_main, "COMMANDS", ("autocompact.cli.replay_cmd",))


def openai_file(tmp_path: Path, transcript: Transcript) -> Path:
    """Write a synthetic transcript as an OpenAI JSON list with usage."""
    items: list[dict[str, object]] = []
    sizes = {c.preceding: c.prompt_tokens for c in transcript.calls}
    for index, message in enumerate(transcript.messages):
        role = "user" if message.role == "user" else "assistant"
        item: dict[str, object] = {"role": role, "content": message.text}
        if index in sizes:
            item["usage"] = {"prompt_tokens": sizes[index], "completion_tokens": 3}
        items.append(item)
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(items))
    return path


def test_cli_replay_leaves_unused_stdlib_modules_unimported(tmp_path: Path) -> None:
    """`autocompact replay --json` (compactions made, no failure rate) imports neither logging
    (nor traceback with it) nor statistics, random or threading: they are imported where a log
    record, a traceback or a seeded failure is made, and each cost every start milliseconds."""
    path = openai_file(tmp_path, synthetic(30))
    code = (
        "import sys\n"
        "from autocompact.cli import main\n"
        f"code = main.main(['replay', {str(path)!r}, '--window', '64000', '--json'])\n"
        "unused = ('logging', 'traceback', 'statistics', 'random', 'threading')\n"
        "print(code, [m for m in unused if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    out = done.stdout.strip().splitlines()
    assert json.loads("\n".join(out[:-1]))["files"][0]["policies"]["ladder"]["compactions"] > 0
    assert out[-1] == "0 []"


@pytest.mark.usefixtures("cli")
def test_cli_json_has_exactly_the_documented_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json prints {"files": [...]} with exactly the keys the issue lists."""
    path = openai_file(tmp_path, synthetic(12))
    assert cli_main.main(["replay", str(path), "--window", "64k", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (entry,) = data["files"]
    assert set(data) == {"files"}
    assert set(entry) == {"file", "format", "window", "calls", "estimation", "policies", "rows"}
    assert entry["window"] == 64_000
    assert entry["calls"] == 12
    assert set(entry["estimation"]) == {"cold", "warm", "calibrated", "calibrated_applied"}
    for summary in entry["estimation"].values():
        assert set(summary) == {
            "mean_error",
            "median_error",
            "p95_abs_error",
            "within_10pct",
            "within_30pct",
        }
    assert set(entry["policies"]) == {"ladder", "legacy"}
    for metrics in entry["policies"].values():
        assert set(metrics) == {
            "compactions",
            "failed_attempts",
            "side_queries",
            "oversized_requests",
            "refused_requests",
            "peak_prompt_tokens",
            "prompt_tokens_sent",
            "mean_fill_at_compaction",
            "outgrown_compactions",
            "no_room_skips",
            "orphaned_pairs",
            "ineffective_compactions",
            "mean_calls_between_compactions",
            "min_calls_between_compactions",
            "close_compactions",
            "cache_write_tokens",
            "cache_read_tokens",
        }
    assert set(entry["rows"][0]) == {
        "call",
        "reported",
        "estimate_cold",
        "estimate_warm",
        "estimate_calibrated",
        "estimate_calibrated_applied",
        "compacted_before",
        "tier",
    }
    assert [r["call"] for r in entry["rows"]] == list(range(1, 13))


@pytest.mark.usefixtures("cli")
def test_cli_terminal_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The terminal report has the chart with its threshold lines and both tables."""
    path = openai_file(tmp_path, synthetic(30))
    assert cli_main.main(["replay", str(path), "--window", "64000"]) == 0
    out = capsys.readouterr().out
    assert "auto 44.8K" in out
    assert "window 64.0K" in out
    assert "L" in out  # the ladder's compaction point
    for label in ("calibrated", "applied (both ways)", "requests over the window", "side queries"):
        assert label in out


@pytest.mark.usefixtures("cli")
def test_cli_bad_file_is_one_line_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed transcript exits 2 with one line naming the file and the line."""
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"type": "user", "sessionId": "s", "message": {"role": "user", "content": "hi"}}\n{oops\n'
    )
    assert cli_main.main(["replay", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"Error: {path}:2: not valid JSON")
    assert "\n" not in err


@pytest.mark.usefixtures("cli")
def test_cli_plot_writes_a_png(tmp_path: Path) -> None:
    """--plot writes a PNG file."""
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    path = openai_file(tmp_path, synthetic(12))
    png = tmp_path / "chart.png"
    assert cli_main.main(["replay", str(path), "--plot", str(png), "--json"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.usefixtures("cli")
@pytest.mark.parametrize(
    ("given", "named"),
    [
        ("chart.qqq", "cannot write a .qqq chart; end the name with one of"),
        ("", "--plot needs a file name"),
        (".", "is a directory: give a file name"),
        ("missing/chart.png", "the folder"),
    ],
    ids=["unknown-extension", "empty", "directory", "no-folder"],
)
def test_cli_plot_to_a_name_matplotlib_cannot_write(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    given: str,
    named: str,
) -> None:
    """--plot to a file matplotlib cannot write is a usage error naming it, before the replay,
    and nothing is written. An unknown extension was "unexpected ValueError" after the replay;
    an empty name wrote no chart and exited 0; a directory (or a name without an extension)
    was written as NAME.png while the message said NAME."""
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    path = openai_file(tmp_path, synthetic(3))
    monkeypatch.chdir(tmp_path)
    assert cli_main.main(["replay", str(path), "--plot", given, "--json"]) == 2
    captured = capsys.readouterr()
    assert named in captured.err
    assert "unexpected" not in captured.err
    assert captured.out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.json"]


@pytest.mark.usefixtures("cli")
def test_cli_plot_without_an_extension_names_the_png(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--plot chart writes chart.png (as matplotlib names it) and says so (it said "chart")."""
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    path = openai_file(tmp_path, synthetic(3))
    monkeypatch.chdir(tmp_path)
    assert cli_main.main(["replay", str(path), "--plot", "chart"]) == 0
    assert "Chart written to chart.png" in capsys.readouterr().err
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.usefixtures("cli")
def test_cli_plot_without_matplotlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without matplotlib, --plot fails before replaying, with the pip hint."""
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: object, **kwargs: object) -> object:
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    path = openai_file(tmp_path, synthetic(3))
    assert cli_main.main(["replay", str(path), "--plot", str(tmp_path / "c.png")]) == 2
    assert 'pip install "autocompact[plot]"' in capsys.readouterr().err
    with pytest.raises(MissingDependencyError):
        write_plot([], tmp_path / "x.png")


def test_policy_metrics_count_gaps_close_pairs_and_cache() -> None:
    """Calls between compactions, unexplained close pairs and cache tokens come from the run."""
    from autocompact.replay.policies import _close_pairs
    from autocompact.replay.records import PolicyResult

    result = PolicyResult(
        name="ladder",
        sizes=(),
        events=(),
        compactions=3,
        failed_attempts=0,
        side_queries=3,
        oversized_requests=0,
        peak_prompt_tokens=0,
        prompt_tokens_sent=0,
        mean_fill_at_compaction=None,
        compaction_calls=(4, 6, 20),
        close_compactions=_close_pairs([(4, False), (6, False), (20, False)]),
    )
    metrics = result.as_json()
    assert metrics["min_calls_between_compactions"] == 2
    assert metrics["mean_calls_between_compactions"] == 8
    assert metrics["close_compactions"] == 1
    assert _close_pairs([(4, True), (6, False)]) == 0  # explained: the first was ineffective


_SESSIONS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "claude-code-sessions"


@pytest.mark.skipif(not _SESSIONS.is_dir(), reason=f"recorded sessions not found at {_SESSIONS}")
@pytest.mark.parametrize(
    ("window", "failure_rate"),
    [(64_000, 0.0), (128_000, 0.0), (200_000, 0.0), (64_000, 1.0)],
)
def test_ladder_makes_no_more_side_queries_than_legacy_on_recorded_sessions(
    window: int, failure_rate: float
) -> None:
    """Issue 10: over every recorded session (sub-agents included) the ladder sends no more side
    queries than the legacy 70 % rule, in total and session by session, never a request over
    the window, never a tool result without its call, and no two compactions < 5 calls apart
    unless the first was reported (ineffective, or outgrown after the fact).

    One session is allowed one side query more than legacy: ``agent-a881341`` at 64K, whose
    third and last call (42.2K reported, auto 44.8K) the pre-send estimate sizes at 72K — new
    content of a mix the calibration has not measured is sized at 2.0 (design decision 64, the
    safe side of the guarantee) — so the ladder compacts there while legacy, looking at the
    previous call's 22K, does not; the transcript ends before legacy's next check."""
    totals = {"ladder": 0, "legacy": 0}
    paths = sorted(_SESSIONS.rglob("*.jsonl.gz"))
    assert len(paths) >= 10
    over_legacy = []
    for path in paths:
        transcript = read_transcript(path)
        options = ReplayOptions(window=window, failure_rate=failure_rate)
        results = {name: simulate_policy(name, transcript, options) for name in totals}
        for name, result in results.items():
            totals[name] += result.side_queries
        ladder = results["ladder"]
        assert ladder.oversized_requests == 0, path.name
        assert ladder.orphaned_pairs == 0, path.name
        assert ladder.close_compactions == 0, path.name
        extra = ladder.side_queries - results["legacy"].side_queries
        if extra > 0:
            over_legacy.append((path.name, extra))
    assert totals["ladder"] <= totals["legacy"]
    allowed = [("agent-a881341.jsonl.gz", 1)] if window == 64_000 else []
    assert over_legacy == allowed


def _bursty(calls: int = 30, burst_at: int = 4) -> Transcript:
    """A session over a 26K system prompt: a 17K first request, then 500 tokens a call with a
    9K burst on each of the 3 calls from ``burst_at``, just after the first compaction: the
    room it bought is gone within 3 calls."""
    messages: list[Message] = []
    recorded = []
    for i in range(calls):
        size = 9_000 if burst_at <= i < burst_at + 3 else 17_000 if i == 0 else 500
        messages.append(Message.user(f"request {i}\n" + "x" * 4 * size))
        recorded.append(
            RecordedCall(
                index=i,
                preceding=len(messages),
                context_start=0,
                prompt_tokens=26_000 + estimate_content_tokens(messages),
            )
        )
        messages.append(Message.model(f"done {i}"))
    return Transcript(
        path="bursty", format="openai-json", messages=tuple(messages), calls=tuple(recorded)
    )


def test_a_compaction_outgrown_by_a_burst_is_reported_not_thrash() -> None:
    """Design decision 63 in replay: the compaction the burst outgrew is reported (outgrown,
    counted), so the close pair is explained; without the judgment it was unexplained thrash."""
    transcript = _bursty()
    ladder = simulate_policy("ladder", transcript, ReplayOptions(window=WINDOW))
    gaps = ladder.calls_between_compactions
    assert gaps
    assert min(gaps) < 5  # the burst did force a second compaction soon after
    assert ladder.outgrown_compactions == 1
    assert ladder.close_compactions == 0
    assert any(event.kind == "outgrown" for event in ladder.events)
    assert ladder.oversized_requests == 0
    assert ladder.orphaned_pairs == 0


def test_orphaned_pairs_are_counted_when_a_request_carries_a_result_without_its_call() -> None:
    """The orphan check sees a tool result whose call is not in the request."""
    from autocompact.content import FunctionCallPart, FunctionResponsePart
    from autocompact.replay.policies import _Sim, _Step, _Summaries

    call = Message.model("run", FunctionCallPart(id="c1", name="bash"))
    result = Message.user(FunctionResponsePart(id="c1", name="bash", response="ok"))
    options = ReplayOptions(window=WINDOW)
    sim = _Sim("ladder", (call, result), options, _Summaries(options, 0), 0)
    sim._check_pairs(_Step(1, 10, 2), None)
    assert sim.orphans == set()
    sim.start = 1  # a cut between the call and its result
    sim._check_pairs(_Step(2, 10, 2), None)
    assert sim.orphans == {"c1"}


def test_indented_json_is_json_dumps_with_indent_2() -> None:
    """The JSON the replay prints is json.dumps(indent=2)'s text, value for value."""
    import enum

    from autocompact.cli.replay_cmd import indented_json

    class Kind(enum.StrEnum):
        A = "a"

    class Level(enum.IntEnum):
        ONE = 1

    values: list[object] = [
        {},
        [],
        (),
        "",
        0,
        -7,
        True,
        False,
        None,
        1.5,
        -0.0,
        1e300,
        float("nan"),
        float("inf"),
        float("-inf"),
        'é \u2028 \x00 "q" \\ 🚀',
        [1, [2, [3, []], {}], ({"a": ()},)],
        {"files": [{"rows": [{"call": 1, "mean": 0.25, "tier": Kind.A}], "n": Level.ONE}]},
        {"é": {"nested": [None, True, {"": [[]]}]}},
        {1: "int key", "b": 2},  # left to json.dumps: it turns the key into "1"
        {True: None, None: 1.0},
    ]
    for value in values:
        assert indented_json(value) == json.dumps(value, indent=2)
    cycle: list[object] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        indented_json(cycle)
    with pytest.raises(TypeError, match="not JSON serializable"):
        indented_json({"a": [object()]})
