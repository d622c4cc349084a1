"""``--fail-on``: one test per rule form on ``tf diff`` and ``tf analyze`` (expected answers
computed here from the documents), malformed rules exit 2 with one line before any trace is
read, changes within noise never break a rule, a rule that cannot be checked breaks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.test_diff_docs import MS, device, doc, one_device, steps

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "synthetic_training.pt.trace.json.gz"
PEAK_TFLOPS = 100.0


def with_mfu(d: dict[str, Any], mfu: float) -> dict[str, Any]:
    """Give the device an MFU row: FLOPs = mfu x peak x window."""
    window = d["devices"][0]["window_ns"]
    flops = mfu * PEAK_TFLOPS * window * 1e3
    d["mfu"]["devices"] = [{"rank": 0, "device": 0, "window_start_ns": 0, "window_ns": window,
                            "flops": flops, "peak_tflops": PEAK_TFLOPS, "mfu": mfu}]  # fmt: skip
    return d


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """BEFORE: 100 ms steps, 40 ms data loading each, MFU 30 %; AFTER: 70 ms steps, 10 ms data
    loading, MFU 20 % (idle share 40 % -> 14.3 %)."""
    out = tmp_path_factory.mktemp("pair")
    b = with_mfu(one_device([100 * MS] * 6, [40 * MS] * 6), 0.30)
    a = with_mfu(one_device([70 * MS] * 6, [10 * MS] * 6), 0.20)
    (out / "before.json").write_text(json.dumps(b))
    (out / "after.json").write_text(json.dumps(a))
    return str(out / "before.json"), str(out / "after.json")


# (rule, breaks on BEFORE -> AFTER, breaks on AFTER -> BEFORE)
DIFF_RULES = [
    ("idle.data_loading>+20%", False, True),  # -75 % / +300 %
    ("idle.data_loading<-50%", True, False),
    ("step_time>+5%", False, True),  # -30 % / +42.9 %
    ("step_time>=+42.8%", False, True),
    ("step_time>+5ms", False, True),  # -30 ms / +30 ms
    ("step_time<-20ms", True, False),
    ("step_time.mean>+29ms", False, True),
    ("mfu<-3%", True, False),  # -33 % / +50 %
    ("mfu<-2pp", True, False),  # -10 pp / +10 pp
    ("idle>+5pp", False, True),  # 40 % -> 14.3 % of the window: -25.7 pp
    ("idle<-25pp", True, False),
    ("idle>30%", False, True),  # on AFTER: 14.3 % / 40 %
    ("idle>14%", True, True),
    ("idle.data_loading>5ms", True, True),  # on AFTER: 10 / 40 ms per step
    ("idle.data_loading>20ms", False, True),
    ("step_time>150ms", False, False),
    ("step_time>=70ms", True, True),
    ("mfu<25%", True, False),  # on AFTER: 20 % / 30 %
    ("comm.exposed>1ms", False, False),
    ("busy.kernel<=60ms", True, True),  # 60 ms per step on both sides (test below)
    ("copy.exposed>+1us", False, False),
]


@pytest.mark.parametrize(("rule", "forward", "backward"), DIFF_RULES)
def test_rule_forms_on_a_diff(
    pair: tuple[str, str],
    rule: str,
    forward: bool,
    backward: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before, after = pair
    for (b, a), breaks in (((before, after), forward), ((after, before), backward)):
        code, out, err = run_cli(["diff", b, a, "--fail-on", rule], capsys)
        assert code == (1 if breaks else 0), (rule, b, err)
        broken = [ln for ln in err.splitlines() if ln.startswith("tf: fail-on: ")]
        assert len(broken) == (1 if breaks else 0), err
        assert out.startswith("traceforensics diff")  # the report is written either way


def test_busy_kernel_per_step_is_what_the_rule_reads(pair: tuple[str, str]) -> None:
    """busy.kernel has no per-step values: the window total over the steps (60 ms both)."""
    from traceforensics.compare import diff_documents

    b, a = (json.loads(Path(p).read_text()) for p in pair)
    f = diff_documents(b, a).job.figures["busy.kernel"]
    assert f.basis == "window_per_step" and f.before == f.after == 60 * MS


def test_every_broken_rule_is_one_line_and_json_still_written(
    pair: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    after, before = pair[1], pair[0]
    code, out, err = run_cli(
        ["diff", after, before, "--json", "--fail-on", "step_time>+5%", "--fail-on",
         "idle.data_loading>+20%", "--fail-on", "mfu<-3%"],
        capsys,
    )  # fmt: skip
    assert code == 1
    assert json.loads(out)["schema"] == "traceforensics.diff/1"
    lines = [ln for ln in err.splitlines() if ln.startswith("tf: fail-on: ")]
    assert len(lines) == 2, err  # mfu rose 20 -> 30 %: not broken
    assert "idle.data_loading +300% (10.00 → 40.00 ms/step) > +20%" in err
    assert "step_time +42.9% (70.00 → 100.00 ms) > +5%" in err


@pytest.fixture(scope="module")
def example_json() -> dict[str, Any]:
    from traceforensics import analyze, load

    return analyze(load(str(EXAMPLE))).to_json()


def test_absolute_rules_on_analyze(
    example_json: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """The idle share and the per-step data-loading idle recomputed from the document."""
    devs = example_json["devices"]
    share = 100 * sum(d["idle_ns"] for d in devs) / sum(d["window_ns"] for d in devs)
    rows = example_json["steps"]
    assert rows, "the example has steps"
    per_step_ms = sum(s["idle_by_cause"]["data_loading"] for s in rows) / len(rows) / MS
    cases = [
        (f"idle>{share - 0.5:.2f}%", 1),
        (f"idle>{share + 0.5:.2f}%", 0),
        (f"idle.data_loading>{per_step_ms * 0.9:.4f}ms", 1 if per_step_ms > 0 else 0),
        (f"idle.data_loading>{per_step_ms * 1.1 + 0.001:.4f}ms", 0),
        ("step_time>1s", 0),
        ("step_time>1us", 1),
    ]
    for rule, want in cases:
        code, out, err = run_cli(["analyze", str(EXAMPLE), "--fail-on", rule], capsys)
        assert code == want, (rule, err)
        assert "== Verdict ==" in out  # the report comes first, the gate after
        assert len([ln for ln in err.splitlines() if "fail-on" in ln]) == want


MALFORMED = [
    ("idle", "not FIGURE OP VALUE"),
    ("idle>", "not FIGURE OP VALUE"),
    ("idle>30", "has no unit"),
    ("idle>3xx", "not FIGURE OP VALUE"),
    ("foo>3%", "unknown figure 'foo'"),
    ("idle.foo>3%", "unknown cause 'foo'"),
    ("busy.foo>3ms", "unknown busy kind 'foo'"),
    ("step_time>30%", "is a time, not a share"),
    ("step_time>+3pp", "is a time, not a share"),
    ("mfu>3ms", "mfu is a fraction"),
    ("idle>3pp", "pp is a change"),
]


@pytest.mark.parametrize(("rule", "words"), MALFORMED)
@pytest.mark.parametrize("command", ["analyze", "diff"])
def test_malformed_rules_exit_2_with_one_line_before_reading(
    command: str, rule: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "missing.json")  # never read: the rule fails first
    paths = [missing] if command == "analyze" else [missing, missing]
    code, out, err = run_cli([command, *paths, "--fail-on", rule], capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "--fail-on" in lines[0], err
    assert "missing.json" not in err


def test_unknown_cause_lists_the_valid_ones(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["analyze", str(EXAMPLE), "--fail-on", "idle.dataloading>1%"], capsys)
    assert code == 2 and "data_loading, host_sync" in err and "untraced" in err


@pytest.mark.parametrize("rule", ["idle.data_loading>+20%", "step_time>+5ms", "mfu<-2pp"])
def test_relative_rule_on_analyze_is_malformed(
    rule: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["analyze", str(EXAMPLE), "--fail-on", rule], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "baseline" in err


def test_change_within_noise_never_breaks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Steps spread ±20 ms; AFTER 6 % slower: above +5 % but within noise -> a note, exit 0."""
    base = [100, 120, 80, 110, 90, 100]
    b = one_device([v * MS for v in base], [0] * 6)
    a = one_device([(v + 6) * MS for v in base], [0] * 6)
    (tmp_path / "b.json").write_text(json.dumps(b))
    (tmp_path / "a.json").write_text(json.dumps(a))
    argv = ["diff", str(tmp_path / "b.json"), str(tmp_path / "a.json")]
    code, _, err = run_cli([*argv, "--fail-on", "step_time>+5%"], capsys)
    assert code == 0, err
    assert "tf: fail-on: note: step_time +6.0%" in err and "not counted" in err
    # the same change with identical steps is beyond noise and breaks
    (tmp_path / "b.json").write_text(json.dumps(one_device([100 * MS] * 6, [0] * 6)))
    (tmp_path / "a.json").write_text(json.dumps(one_device([106 * MS] * 6, [0] * 6)))
    code, _, err = run_cli([*argv, "--fail-on", "step_time>+5%"], capsys)
    assert code == 1 and "tf: fail-on: step_time +6.0%" in err


def test_rule_that_cannot_be_checked_breaks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    no_steps = doc([device(idle_by_cause={"host_sync": 10 * MS})], [])
    (tmp_path / "b.json").write_text(json.dumps(no_steps))
    (tmp_path / "a.json").write_text(json.dumps(one_device([MS] * 4, [0] * 4)))
    argv = ["diff", str(tmp_path / "b.json"), str(tmp_path / "a.json")]
    code, _, err = run_cli([*argv, "--fail-on", "step_time>+5%"], capsys)
    assert code == 1 and "cannot be checked (no steps in BEFORE)" in err
    code, _, err = run_cli([*argv, "--fail-on", "mfu<20%"], capsys)
    assert code == 1 and "cannot be checked (no FLOPs or no peak" in err
    steps_only = doc([device(window_ns=4 * MS)], steps(0, 0, [MS] * 4, [0] * 4))
    (tmp_path / "b.json").write_text(json.dumps(steps_only))
    code, _, err = run_cli([*argv, "--fail-on", "step_time>+5%"], capsys)
    assert code == 0, err


def test_help_states_the_rules_and_exit_code_1() -> None:
    from click.testing import CliRunner

    from traceforensics.cli.main import cli

    for argv in (["diff", "--help"], ["analyze", "--help"], ["--help"]):
        result = CliRunner().invoke(cli, argv, terminal_width=100)
        text = " ".join(result.output.split())
        assert result.exit_code == 0, result.output
        gate = "With --fail-on: 1 when a rule broke" if argv[0] != "--help" else "1 a --fail-on"
        assert gate in text, text
    diff_help = " ".join(CliRunner().invoke(cli, ["diff", "--help"]).output.split())
    assert "Examples: tf diff " in diff_help and "--baseline" in diff_help
    for shared in ("--steps", "--window", "--step-pattern", "--jobs", "--no-cache"):
        assert shared in diff_help
