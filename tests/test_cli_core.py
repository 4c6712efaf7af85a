"""The ``thresholds`` and ``demo`` commands, and how the command line reports errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autocompact.cli import main as cli_main
from autocompact.compaction import CompressionStatus, CompressionTrigger
from autocompact.context_report import build_context_report
from autocompact.demo import run_demo
from autocompact.thresholds import compute_thresholds

# SPEC §3's reference table: window -> (warn, auto, hard, effective).
SPEC_TABLE = {
    32_000: (19_200, 22_400, 22_400, 12_000),
    64_000: (38_400, 44_800, 44_800, 44_000),
    128_000: (76_800, 95_000, 105_000, 108_000),
    131_072: (78_643.2, 98_072, 108_072, 111_072),
    200_000: (147_000, 167_000, 177_000, 180_000),
    256_000: (203_000, 223_000, 233_000, 236_000),
    1_000_000: (947_000, 967_000, 977_000, 980_000),
}


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli_main.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_thresholds_json_reproduces_the_spec_table(capsys: pytest.CaptureFixture[str]) -> None:
    """`thresholds --json` gives SPEC §3's values for its windows, exactly."""
    windows = [str(w) for w in SPEC_TABLE]
    code, out, _ = run_cli(capsys, "thresholds", *windows, "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["window"] for r in rows] == list(SPEC_TABLE)
    for row in rows:
        warn, auto, hard, effective = SPEC_TABLE[row["window"]]
        assert (row["warn"], row["auto"], row["hard"]) == pytest.approx((warn, auto, hard))
        assert row["effective_window"] == effective
        assert set(row["tier_sources"]) == {"warn", "auto", "hard"}


def test_thresholds_default_windows_and_branches(capsys: pytest.CaptureFixture[str]) -> None:
    """Without windows it prints 32k … 1m; 32K collapses hard onto auto, 200K is absolute."""
    code, out, _ = run_cli(capsys, "thresholds", "--json")
    rows = {r["window"]: r for r in json.loads(out)}
    assert code == 0
    assert list(rows) == [32_000, 64_000, 128_000, 200_000, 256_000, 1_000_000]
    assert rows[32_000]["tier_sources"]["hard"] == "collapsed"
    assert rows[128_000]["tier_sources"] == {
        "warn": "proportional",
        "auto": "absolute",
        "hard": "absolute",
    }
    assert set(rows[200_000]["tier_sources"].values()) == {"absolute"}


def test_thresholds_table_names_each_branch(capsys: pytest.CaptureFixture[str]) -> None:
    """The table shows the values and which branch set them."""
    code, out, _ = run_cli(capsys, "thresholds", "128k")
    assert code == 0
    assert "76,800" in out
    assert "95,000" in out
    assert "105,000" in out
    assert "prop / abs / abs" in out


@pytest.mark.parametrize(
    ("window", "line"),
    [
        (8_000, "0 (the window is no larger than the 20K reserve; the thresholds are shares"),
        (20_000, "0 (the window is no larger than the 20K reserve; the thresholds are shares"),
        (20_001, "1 (window − 20K reserve)"),
        (32_000, "12K (window − 20K reserve)"),
    ],
    ids=["8K", "20K", "20,001", "32K"],
)
def test_the_effective_window_line_says_what_a_zero_means(window: int, line: str) -> None:
    """On a window no larger than the 20K reserve the effective window is 0: the /context line
    says the thresholds are then shares of the window, not 'window − 20K reserve'."""
    report = build_context_report(0, compute_thresholds(window))
    assert report.lines[0].startswith(f"Effective window  {line}")


@pytest.mark.parametrize(("windows", "noted"), [(["8k", "32k"], True), (["32k"], False)])
def test_thresholds_table_explains_an_effective_window_of_zero(
    capsys: pytest.CaptureFixture[str], windows: list[str], noted: bool
) -> None:
    """`thresholds` notes what a 0 in the effective column means, when one is shown."""
    code, out, _ = run_cli(capsys, "thresholds", *windows)
    assert code == 0
    text = " ".join(out.split())  # (the console wraps the note at its width)
    assert ("effective 0: the window is no larger than the 20K summary reserve" in text) is noted


@pytest.mark.parametrize("window", ["-5", "abc", "1.5", "12q"])
def test_bad_window_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], window: str) -> None:
    """A bad window names the value, says how to write one, and shows no traceback."""
    code, _out, err = run_cli(capsys, "thresholds", window)
    assert code == 2
    assert err.startswith("Error: ")
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert window.lstrip("-") in err


def test_debug_flag_shows_the_traceback_anywhere_on_the_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--debug after the command still works and adds the traceback."""
    code, _, err = run_cli(capsys, "thresholds", "abc", "--debug")
    assert code == 2
    assert "Traceback" in err
    assert err.rstrip().endswith("write it like 131072, 128k or 1m")


def test_unexpected_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug inside a command is reported in one line that points to --debug."""
    import autocompact.cli.thresholds_cmd as cmd

    def boom(_: object) -> int:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(cmd, "run", boom)
    code, _, err = run_cli(capsys, "thresholds")
    assert code == 1
    assert "unexpected RuntimeError: kaboom" in err
    assert "--debug" in err
    assert "Traceback" not in err


def test_demo_shows_every_behaviour_of_the_ladder() -> None:
    """The demo crosses warn, compacts at auto, trips the breaker with three failed summaries,
    refuses a truncated summary at hard and recovers with a hard rescue."""
    report = run_demo()
    attempts = [(i.trigger, i.status) for i in report.compactions]
    assert attempts[0] == (CompressionTrigger.AUTO, CompressionStatus.COMPRESSED)
    assert attempts[1:4] == [
        (CompressionTrigger.AUTO, CompressionStatus.COMPRESSION_FAILED_EMPTY_SUMMARY),
        (CompressionTrigger.AUTO, CompressionStatus.COMPRESSION_FAILED_PROVIDER_ERROR),
        (CompressionTrigger.AUTO, CompressionStatus.COMPRESSION_FAILED_INFLATED_TOKEN_COUNT),
    ]
    assert attempts[4:] == [
        (CompressionTrigger.HARD, CompressionStatus.COMPRESSION_FAILED_OUTPUT_TRUNCATED),
        (CompressionTrigger.HARD, CompressionStatus.COMPRESSED),
    ]
    events = [e for turn in report.turns for e in turn.events]
    assert any(e.startswith("breaker open after 3 failures") for e in events)
    assert any(e.startswith("breaker closed") for e in events)
    assert any(e.startswith("request trimmed") for e in events)
    tips = [turn.tip.id for turn in report.turns if turn.tip is not None]
    assert tips[0] == "compress-intro"
    assert "context-high" in tips
    assert "context-critical" in tips
    assert tips.index("context-high") < tips.index("context-critical")
    assert report.context_reports
    assert "← current" in "\n".join(report.context_reports[0][1].lines)
    # Nothing the demo sent was over the window.
    assert max(turn.tokens_before for turn in report.turns) < report.window


def test_demo_json_is_data(capsys: pytest.CaptureFixture[str]) -> None:
    """`demo --json` prints the turns, tips, /context reports and compactions as JSON."""
    code, out, _ = run_cli(capsys, "demo", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["window"] == 100_000
    assert {"turns", "context_reports", "compactions", "thresholds"} <= set(data)
    statuses = [c["status"] for c in data["compactions"]]
    assert statuses[0] == "compressed"
    assert statuses[-1] == "compressed"
    assert any(t["tip"] and t["tip"]["id"] == "context-critical" for t in data["turns"])


def test_console_script_runs_the_demo() -> None:
    """The installed `autocompact` entry point runs the demo and exits 0."""
    result = subprocess.run(
        [sys.executable, "-m", "autocompact.cli.main", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "breaker open after 3 failures" in result.stdout
    assert "tip: context-critical" in result.stdout


def test_command_summaries_match_the_modules() -> None:
    """The lazy top-level help lists each command exactly as its module registers it."""
    import argparse
    import importlib

    assert set(cli_main.SUMMARIES) == set(cli_main.COMMANDS)
    for module, (name, text) in cli_main.SUMMARIES.items():
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(module).register(sub)
        actions = {a.dest: a.help for a in sub._choices_actions}
        assert actions.get(name) == text, module


def test_help_is_the_same_lazy_or_full() -> None:
    """`autocompact --help` from the summaries equals the help of the fully built parser."""
    assert cli_main.build_parser(None).format_help() == cli_main.build_parser().format_help()


def _python_says(code: str) -> str:
    """What a fresh interpreter running ``code`` prints (stripped): a clean ``sys.modules``."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip()


def test_help_imports_no_command_module() -> None:
    """`autocompact --help` imports no command module, engine, rich or prompt_toolkit."""
    code = (
        "import sys\n"
        "from autocompact.cli import main\n"
        "try:\n"
        "    main.main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('rich', 'prompt_toolkit', "
        "'matplotlib', 'openai', 'anthropic') or m.startswith('autocompact.cli.') and "
        "m != 'autocompact.cli.main' or m in ('autocompact.chat', 'autocompact.compaction')]\n"
        "print(heavy)\n"
    )
    assert _python_says(code).splitlines()[-1] == "[]"


def test_a_command_runs_with_only_its_module(capsys: pytest.CaptureFixture[str]) -> None:
    """`thresholds` works when the parser registers only that command (the lazy path)."""
    code, out, _ = run_cli(capsys, "--debug", "thresholds", "200000", "--json")
    assert code == 0
    assert json.loads(out)[0]["window"] == 200_000


def test_package_names_load_when_first_used() -> None:
    """`import autocompact` defers its public names and submodules but serves every one of them."""
    code = (
        "import sys, autocompact\n"
        "lazy = 'autocompact.chat' not in sys.modules\n"
        "names = [n for n in autocompact.__all__ if getattr(autocompact, n, None) is None]\n"
        "print(lazy, names, autocompact.estimation.__name__, hasattr(autocompact, 'nope'))\n"
    )
    assert _python_says(code).split() == ["True", "[]", "autocompact.estimation", "False"]


@pytest.mark.parametrize("columns", [None, "100", "37", "0", "-3", "wide"])
def test_terminal_columns_is_shutils_measure(
    monkeypatch: pytest.MonkeyPatch, columns: str | None
) -> None:
    """The parsers' width is shutil.get_terminal_size()'s, COLUMNS or not, valid or not."""
    import shutil

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert cli_main.terminal_columns() == shutil.get_terminal_size().columns


def test_a_command_parses_without_importing_shutil() -> None:
    """Building the parser and parsing a command line does not import shutil (argparse's own
    formatter would, once per argument added); the help is laid out the same (the tests above
    compare it with argparse's)."""
    code = (
        "import sys\n"
        "from autocompact.cli import main\n"
        "main.build_parser('replay').parse_args(['replay', 'x.jsonl', '--json'])\n"
        "print('shutil' in sys.modules)\n"
    )
    assert _python_says(code).splitlines()[-1] == "False"
