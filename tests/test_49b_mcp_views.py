"""``tf mcp``'s parts in process: the answers' size guard (``report.views_fit``), the roots
(``cli.mcp_roots``), the tools (``cli.mcp_tools``: options, memo, errors) and the views on
every shared trace and on generated traces that lack whole event families."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import FIXTURES, TRACES, kineto_trace_files, nsys_trace_files
from traceforensics.cli.analyze import analysis_of
from traceforensics.cli.mcp_roots import Roots
from traceforensics.cli.mcp_tools import MAX_ROWS, Tools, _options
from traceforensics.model.errors import InputError
from traceforensics.report.views import SHOWN, Where, analysis_view
from traceforensics.report.views_fit import BUDGET_CHARS, compact, fit, size

ROOT = Path(__file__).resolve().parents[1]
SYNTH = FIXTURES / "recorded" / "baseline.pt.trace.json.gz"


# -- the size guard --------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.integers() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=400,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6), st.integers(50, 3000))
def test_fit_cuts_until_the_answer_fits_and_names_every_cut(
    answer: dict[str, Any], budget: int
) -> None:
    answer.pop("more", None)
    original = json.loads(compact(answer))
    out = fit(json.loads(compact(answer)), "tf analyze X --json", budget)
    for m in out["more"]:
        assert m["shown"] < m["total"] and m["command"] == "tf analyze X --json"
    if size(out) > budget:  # only when no list of two items or more is left to cut
        rest = {k: v for k, v in out.items() if k != "more"}
        assert not _has_long_list(rest)
    if not out["more"]:
        assert {k: v for k, v in out.items() if k != "more"} == original


def _has_long_list(obj: Any) -> bool:
    if isinstance(obj, list):
        return len(obj) > 1 or any(_has_long_list(x) for x in obj)
    if isinstance(obj, dict):
        return any(_has_long_list(v) for v in obj.values())
    return False


def test_fit_keeps_the_head_of_the_largest_list() -> None:
    answer = {"small": [1, 2], "big": [{"x": "y" * 100, "i": i} for i in range(400)]}
    out = fit(answer, "cmd", budget=5_000)
    assert size(out) <= 5_000
    assert [r["i"] for r in out["big"]] == list(range(len(out["big"])))
    assert out["small"] == [1, 2]
    assert out["more"][-1]["what"] == "big" and out["more"][0]["total"] == 400


def test_a_name_that_is_not_utf8_is_escaped_not_a_crash() -> None:
    answer = {"inputs": ["trace-\udce9.json"]}
    assert "\\udce9" in compact(answer)
    assert fit(answer, "cmd")["inputs"] == ["trace-\udce9.json"]


# -- the roots ---------------------------------------------------------------------------
def test_roots_resolve_relative_paths_and_refuse_escapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "out"
    for d in (a, b, out):
        d.mkdir()
    (b / "t.json").write_text("{}")
    (out / "s.json").write_text("{}")
    (a / "link.json").symlink_to(out / "s.json")
    (a / "inner").symlink_to(b)  # a link to another root's folder stays inside the roots
    monkeypatch.chdir(a)
    roots = Roots.of([str(a), str(b)])
    assert roots.confine("t.json") == str(b / "t.json")  # found in the second root
    assert roots.confine("missing.json") == "missing.json"  # the first root is the cwd
    assert roots.confine(str(b / "t.json")) == str(b / "t.json")
    assert roots.confine("inner/t.json") == "inner/t.json"
    for bad in ("link.json", str(out / "s.json"), "../out/s.json", str(b / ".." / "out")):
        with pytest.raises(InputError, match="outside the folders this server may read"):
            roots.confine(bad)
    for empty in ("", "a\0b"):
        with pytest.raises(InputError, match="not a path"):
            roots.confine(empty)
    with pytest.raises(InputError, match="--root"):
        Roots.of([str(tmp_path / "nope")])
    monkeypatch.chdir(out)
    assert Roots.of([]).dirs == (out.resolve(),)  # default: the working directory


def test_a_relative_path_missing_everywhere_names_the_first_root(tmp_path: Path) -> None:
    roots = Roots.of([str(tmp_path)])
    assert roots.confine("x.json") == str(tmp_path.resolve() / "x.json")


# -- the tools ---------------------------------------------------------------------------
def test_options_of_steps_and_window() -> None:
    opts, words = _options("3:", "200ms:1.5s", {"top_gaps": 40, "top": 2})
    assert opts.range.steps == "3:" and opts.range.start_ns == 200_000_000
    assert opts.range.end_ns == 1_500_000_000
    # sizes rounded up to a power of two, never below the defaults
    assert opts.idle.top_gaps == 64 and opts.kernels.top == SHOWN["kernels"]
    assert words == ["--steps=3:", "--from=200ms", "--to=1.5s", "--gaps=64"]
    assert _options(None, None, {"top_gaps": 33})[0] == _options(None, None, {"top_gaps": 60})[0]
    assert _options(None, "trace", {})[0].idle.window == "trace"
    assert _options(None, ":2s", {})[0].range.start_ns is None
    for bad in ("sometimes", "1 parsec:2s"):
        with pytest.raises(InputError, match="window"):
            _options(None, bad, {})


@pytest.fixture
def tools(tmp_path: Path) -> Tools:
    shutil.copyfile(SYNTH, tmp_path / "t.pt.trace.json.gz")
    return Tools(Roots.of([str(tmp_path)]))


def test_a_second_question_is_answered_from_memory(
    tools: Tools, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import traceforensics.cli.mcp_tools as mod

    calls: list[str] = []

    def counting(path: str, *a: Any, **k: Any) -> Any:
        calls.append(path)
        return analysis_of(path, *a, **k)

    monkeypatch.setattr(mod, "analysis_of", counting)
    path = str(tmp_path / "t.pt.trace.json.gz")
    first = tools.analyze(path)
    tools.findings(path)
    tools.gaps(path, top=3)
    tools.kernels(path, top=2)
    assert calls == [path]  # one analysis for four questions
    assert tools.analyze(path) == first
    # the file replaced by another trace: analysed again, a different answer
    shutil.copyfile(FIXTURES / "recorded" / "dataloader.pt.trace.json.gz", path)
    second = tools.analyze(path)
    assert len(calls) == 2 and second["verdict"] != first["verdict"]


def test_tool_argument_errors_are_one_line_input_errors(tools: Tools, tmp_path: Path) -> None:
    path = str(tmp_path / "t.pt.trace.json.gz")
    cases = [
        (lambda: tools.gaps(path, top=0), "top 0"),
        (lambda: tools.gap(path, index=-1), "gap -1"),
        (lambda: tools.gap(path, index=MAX_ROWS), f"gap {MAX_ROWS}"),
        (lambda: tools.findings(path, category="speed"), "category 'speed'"),
        (lambda: tools.analyze(path, steps="x:y"), "steps"),
        (lambda: tools.diff(None, path), "give before"),
        (lambda: tools.diff(path, path, baseline="run=x"), "give before"),
        (lambda: tools.diff(path, path, fail_on=["speed>5"]), "speed"),
        (lambda: tools.history(figure="speed"), "speed"),
        (lambda: tools.explain("speed"), "'speed'"),
    ]
    for call, words in cases:
        with pytest.raises(InputError) as info:
            call()
        assert words in str(info.value) and "\n" not in str(info.value)


def test_findings_of_a_category_with_none_is_an_empty_list(tools: Tools, tmp_path: Path) -> None:
    view = tools.findings(str(tmp_path / "t.pt.trace.json.gz"), category="compilation")
    assert view["findings"] == [] and view["total"] == 0


def test_a_diff_of_a_trace_with_itself_moves_nothing(tools: Tools, tmp_path: Path) -> None:
    path = str(tmp_path / "t.pt.trace.json.gz")
    view = tools.diff(path, path, fail_on=["step_time>+5%"])
    assert view["verdict"]["outcome"] == "no_effect"
    assert view["gate"] == "passed" and view["rules"][0]["broken"] is False
    assert all(f["delta"] in (0, 0.0, None) for f in view["job"].values())


# -- every shared trace and traces without whole event families ---------------------------
SHARED = [*kineto_trace_files(), *nsys_trace_files(), "hta/job128_sampled"]


@pytest.mark.parametrize("rel", SHARED or ["(none)"])
def test_every_shared_trace_answers_within_the_budget(rel: str) -> None:
    if not SHARED:
        pytest.skip("../shared/traces not present (tests on real traces need ../shared)")
    tools = Tools(Roots.of([str(TRACES)]))
    path = str(TRACES / rel)
    views = [
        tools.analyze(path),
        tools.findings(path),
        tools.gaps(path),
        tools.kernels(path),
        tools.ranks(path),
    ]
    doc = tools._analysed(path, _options(None, None, {})[0]).doc
    for v in views:
        assert size(v) <= BUDGET_CHARS
        assert v["schema"] == "traceforensics.analysis/1"
    analyze, findings, gaps = views[:3]
    assert analyze["verdict"], rel
    assert [f["category"] for f in analyze["findings"]] == [
        f["category"] for f in doc["findings"][: len(analyze["findings"])]
    ]
    assert findings["total"] == len(doc["findings"])
    assert gaps["gaps_listed"] == len(doc["gaps"])
    for i in range(min(2, len(doc["gaps"]))):
        assert tools.gap(path, i)["gap"] == doc["gaps"][i]


def test_a_trace_without_gpu_work_answers_with_its_diagnostic() -> None:
    if not TRACES.exists():
        pytest.skip("../shared/traces not present (tests on real traces need ../shared)")
    tools = Tools(Roots.of([str(TRACES)]))
    view = tools.analyze(str(TRACES / "hta/cpu_only_rank34.json.gz"))
    assert view["devices"] == [] and view["findings"] == []
    assert view["verdict"] and view["diagnostics"]
    assert tools.gaps(str(TRACES / "hta/cpu_only_rank34.json.gz"))["gaps"] == []
    with pytest.raises(InputError, match="lists no idle gap"):
        tools.gap(str(TRACES / "hta/cpu_only_rank34.json.gz"), 0)


def test_analysis_view_of_an_empty_document_is_total() -> None:
    view = analysis_view({}, [], Where())
    assert view["findings"] == [] and view["devices"] == [] and view["more"] == []


# -- the documents in an installed package ---------------------------------------------------
def test_the_build_puts_the_served_documents_in_the_package(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=os.environ | {"SETUPTOOLS_USE_DISTUTILS": "local"},
    )
    assert run.returncode == 0, run.stderr
    for name in ("causes.md", "findings.md"):
        built = tmp_path / "traceforensics" / "data" / "docs" / name
        assert built.read_text(encoding="utf-8") == (ROOT / "docs" / name).read_text("utf-8")


def test_doc_text_reads_the_source_tree_without_a_packaged_copy() -> None:
    pytest.importorskip("mcp", reason="tf mcp needs the mcp extra")
    from traceforensics.cli.mcp_server import DOCS, doc_text

    for name, _ in DOCS.values():
        assert doc_text(name) == (ROOT / "docs" / name).read_text(encoding="utf-8")


# -- review cases: pointers stay consistent, links in a directory, "/", waiting --------------
def test_cut_fields_have_one_pointer_with_the_original_total() -> None:
    from traceforensics.report.views import _finding

    more: list[dict[str, Any]] = []
    findings = [{"title": "x" * 3000, "evidence": [{"e": i} for i in range(5)]} for _ in range(60)]
    answer = {"findings": [_finding(f, i, more, Where()) for i, f in enumerate(findings)]}
    answer["more"] = more
    out = fit(answer, "cmd")
    assert size(out) <= BUDGET_CHARS
    kept = len(out["findings"])
    by_field = [m["what"] for m in out["more"]]
    assert len(by_field) == len(set(by_field))  # one pointer per field
    (listed,) = [m for m in out["more"] if m["what"] == "findings"]
    assert listed["shown"] == kept and listed["total"] == 60
    assert {f"findings[{i}].evidence" for i in range(kept)} <= set(by_field)
    assert not any(w.startswith(f"findings[{kept}]") for w in by_field)  # cut away: gone


def test_a_list_keeps_as_many_items_as_fit() -> None:
    rows = [{"i": i, "pad": "x" * 90} for i in range(1000)]
    out = fit({"rows": list(rows)}, "cmd", budget=20_000)
    kept = len(out["rows"])
    assert size(out) <= 20_000
    out["rows"] = rows[: kept + 1]
    assert size(out) > 20_000  # one more would not fit: not just half of what fits


def test_a_text_too_long_for_any_answer_is_cut_and_pointed_to() -> None:
    out = fit({"name": "k" * 50_000, "more": []}, "cmd", budget=2_000)
    assert size(out) <= 2_000 and out["name"].endswith("…")
    assert out["more"] == [{"what": "name", "shown": 1000, "total": 50_000, "command": "cmd"}]


def test_a_directory_with_a_link_outside_is_refused(tmp_path: Path) -> None:
    root, out = tmp_path / "root", tmp_path / "out"
    (root / "ranks").mkdir(parents=True)
    out.mkdir()
    (out / "r1.json.gz").write_text("x")
    (root / "ranks" / "r0.json.gz").write_text("x")
    roots = Roots.of([str(root)])
    assert roots.confine(str(root / "ranks")) == str(root / "ranks")
    (root / "ranks" / "r1.json.gz").symlink_to(out / "r1.json.gz")
    with pytest.raises(InputError, match=r"ranks: r1.json.gz: outside the folders"):
        roots.confine(str(root / "ranks"))


def test_the_file_system_root_is_never_the_implicit_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")
    with pytest.raises(InputError, match="--root DIR"):
        Roots.of([])
    assert Roots.of(["/"]).dirs == (Path("/"),)  # named on purpose: allowed


def test_a_remembered_answer_never_waits_for_another_analysis(
    tools: Tools, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import traceforensics.cli.mcp_tools as mod

    first = str(tmp_path / "t.pt.trace.json.gz")
    other = str(tmp_path / "u.pt.trace.json.gz")
    shutil.copyfile(FIXTURES / "recorded" / "dataloader.pt.trace.json.gz", other)
    tools.analyze(first)  # remembered
    started, release = threading.Event(), threading.Event()

    def slow(path: str, *a: Any, **k: Any) -> Any:
        started.set()
        release.wait(30)
        return analysis_of(path, *a, **k)

    monkeypatch.setattr(mod, "analysis_of", slow)
    worker = threading.Thread(target=tools.analyze, args=(other,))
    worker.start()
    assert started.wait(30)
    answered: list[dict[str, Any]] = []
    asking = threading.Thread(target=lambda: answered.append(tools.findings(first)))
    asking.start()
    asking.join(20)  # (the other analysis is held until ``release``: it must not block this)
    before_release = list(answered)
    release.set()
    worker.join(60)
    asking.join(60)
    assert before_release and before_release[0]["total"] == len(before_release[0]["findings"])
