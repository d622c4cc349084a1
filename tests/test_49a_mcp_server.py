"""``tf mcp`` as a client meets it (issue 49's acceptance): the server started as a subprocess
and driven by the MCP SDK's own stdio client. Every tool is called on shared traces (a file,
a rank directory, a diff pair) and its answer compared with what ``tf analyze --json``,
``tf diff --json``, ``tf history --json`` and ``tf explain`` print for the same input; a path
outside the roots is refused; a broken trace gets the CLI's own one-line error as a tool error
and the server goes on answering.

The server has a cache folder of its own (``XDG_CACHE_HOME``), so its analyses are computed
by it, not read from the CLI runs' cache; one session answers every call (``answers``).
"""

from __future__ import annotations

import gzip
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TRACES
from tests.test_nsys_errors import _stand_in_nsys

mcp = pytest.importorskip("mcp", reason="tf mcp needs the mcp extra (pip install -e '.[dev]')")

TF = str(Path(sys.executable).with_name("tf"))
W0 = "kineto/resnet50_v100_workers0.pt.trace.json.gz"
W4 = "kineto/resnet50_v100_workers4.pt.trace.json.gz"
JOB = "hta/job128_sampled"
SMALL = "hta/alexnet_a100_sync.json.gz"
TOOLS = ("analyze", "findings", "gaps", "gap", "kernels", "ranks", "diff", "history", "explain")
Answers = dict[str, Any]


def _env(cache: Path, path: Path | None = None) -> dict[str, str]:
    extra = {"PATH": f"{path}{os.pathsep}{os.environ['PATH']}"} if path else {}
    return os.environ | {"XDG_CACHE_HOME": str(cache)} | extra


def _cli(argv: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """``tf ARGV`` as a user runs it (the console script), in ``cwd``."""
    return subprocess.run(
        [TF, *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(cache),
        timeout=300,
        check=False,
    )


def _cli_json(argv: list[str], cwd: Path, cache: Path) -> Any:
    run = _cli([*argv, "--json"], cwd, cache)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: size and mtime (what a write would change)."""
    return {
        str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in folder.rglob("*")
    }


async def _session(
    server_args: list[str], cwd: Path, env: dict[str, str], calls: list[Any]
) -> Answers:
    """Start ``tf mcp``, list its tools and documents, make ``calls`` ((key, tool, arguments))
    in order; every answer by key."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=TF, args=["mcp", *server_args], cwd=str(cwd), env=env)
    out: Answers = {}
    async with Client(params) as client:
        out["tools"] = (await client.list_tools()).tools
        out["resources"] = (await client.list_resources()).resources
        for r in out["resources"]:
            read = await client.read_resource(str(r.uri))
            out[f"resource:{r.name}"] = read.contents[0].text  # type: ignore[union-attr]
        for key, tool, arguments in calls:
            out[key] = await client.call_tool(tool, arguments)
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The folders: a root with a broken trace and a link that leads outside, an outside
    folder, the server's own cache and the CLI's."""
    if not TRACES.exists():
        pytest.skip("../shared/traces not present (tests on real traces need ../shared)")
    base = tmp_path_factory.mktemp("mcp")
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    # a damaged file (its deflate stream is not one): a truncated trace would be salvaged
    packed = gzip.compress(gzip.decompress((TRACES / SMALL).read_bytes()))
    (root / "broken.json.gz").write_bytes(packed[:10] + bytes(b ^ 0x5A for b in packed[10:2000]))
    shutil.copyfile(TRACES / SMALL, outside / "secret.json.gz")
    (root / "escape.json.gz").symlink_to(outside / "secret.json.gz")
    # a rank directory whose second file is a link to a file outside the roots
    (root / "ranks").mkdir()
    shutil.copyfile(TRACES / JOB / "rank-0.json.gz", root / "ranks" / "rank-0.json.gz")
    (root / "ranks" / "rank-1.json.gz").symlink_to(outside / "secret.json.gz")
    # a .nsys-rep, exported by a stand-in nsys (the export must land in the cache, not here)
    (root / "run.nsys-rep").write_bytes(b"NSYS-REP stand-in, not parsed by the test")
    _stand_in_nsys(base / "bin", base / "nsys.log")
    store = f"sqlite:///{base / 'history.sqlite'}"
    return {
        "root": root,
        "bin": base / "bin",
        "outside": outside,
        "server_cache": base / "server-cache",
        "cli_cache": base / "cli-cache",
        "store": store,
    }


@pytest.fixture(scope="module")
def answers(world: dict[str, Any]) -> Answers:
    """One server session answering every call of this module (and the CLI's side of it)."""
    import anyio

    root, cli_cache = world["root"], world["cli_cache"]
    # a stored run for history and a baseline (the CLI writes the store; the server reads it)
    stored = _cli([
        "analyze", str(TRACES / W0), "--store", world["store"], "--label", "run=mcp-test",
    ], root, cli_cache)  # fmt: skip
    assert stored.returncode == 0, stored.stderr
    w0, w4, job = str(TRACES / W0), str(TRACES / W4), str(TRACES / JOB)
    calls = [
        ("analyze", "analyze", {"path": w0}),
        ("analyze_rel", "analyze", {"path": W0}),
        ("analyze_steps", "analyze", {"path": w0, "steps": "7:9", "window": "trace"}),
        ("findings", "findings", {"path": w0}),
        ("findings_dl", "findings", {"path": w0, "category": "data_loading"}),
        ("findings_bad", "findings", {"path": w0, "category": "no_such_category"}),
        ("gaps", "gaps", {"path": w0, "top": 4}),
        ("gap", "gap", {"path": w0, "index": 2}),
        ("gap_past", "gap", {"path": w0, "index": 999_999}),
        ("kernels", "kernels", {"path": w0, "top": 3}),
        ("ranks", "ranks", {"path": job}),
        ("analyze_job", "analyze", {"path": job}),
        ("diff", "diff", {"before": w0, "after": w4, "fail_on": ["step_time>+5%", "idle<-10%"]}),
        ("diff_baseline", "diff", {"after": w4, "baseline": "run=mcp-test"}),
        ("history", "history", {"label": ["run=mcp-test"]}),
        ("trend", "history", {"figure": "idle.data_loading"}),
        ("explain", "explain", {"id": "host_sync"}),
        ("explain_all", "explain", {}),
        ("explain_bad", "explain", {"id": "no_such_id"}),
        ("outside", "analyze", {"path": str(world["outside"] / "secret.json.gz")}),
        ("escape", "analyze", {"path": "escape.json.gz"}),
        ("dotdot", "analyze", {"path": "../outside/secret.json.gz"}),
        ("broken", "analyze", {"path": "broken.json.gz"}),
        ("broken_abs", "gaps", {"path": str(root / "broken.json.gz")}),
        ("after_broken", "analyze", {"path": w0}),
        ("ranks_escape", "ranks", {"path": "ranks"}),
        ("nsys_rep", "analyze", {"path": "run.nsys-rep"}),
        ("bad_type", "gap", {"path": w0, "index": "first"}),
        ("missing_arg", "gap", {"path": w0}),
        ("negative", "gaps", {"path": w0, "top": -2}),
        ("gaps_page", "gaps", {"path": w0, "top": 2, "start": 2}),
        ("no_tool", "no_such_tool", {}),
        ("empty_window", "analyze", {"path": w0, "window": "0:0"}),
    ]
    before = _tree(root)
    args = ["--root", str(root), "--root", str(TRACES), "--store", world["store"]]
    env = _env(world["server_cache"], world["bin"])
    out = anyio.run(_session, args, root, env, calls)
    out["root_unchanged"] = before == _tree(root)
    return out


def _ok(answers: Answers, key: str) -> dict[str, Any]:
    result = answers[key]
    assert not result.is_error, result.content[0].text
    text = json.loads(result.content[0].text)
    assert text == result.structured_content  # the model's text and the client's object agree
    return dict(text)


def _error(answers: Answers, key: str) -> str:
    result = answers[key]
    assert result.is_error, f"{key}: expected a tool error, got an answer"
    assert len(result.content) == 1
    line: str = result.content[0].text
    assert "\n" not in line and "Traceback" not in line
    return line


# -- the tools and documents ---------------------------------------------------------------
def test_every_tool_is_listed_with_a_schema_and_a_description(answers: Answers) -> None:
    tools = {t.name: t for t in answers["tools"]}
    assert set(tools) == set(TOOLS)
    for t in tools.values():
        assert t.description and len(t.description) > 60, t.name
        assert t.input_schema["type"] == "object"
        assert t.annotations is not None and t.annotations.read_only_hint
        for name, prop in t.input_schema.get("properties", {}).items():
            assert prop.get("description"), f"{t.name}.{name} has no description"
    assert tools["analyze"].input_schema["required"] == ["path"]
    assert set(tools["analyze"].input_schema["properties"]) == {"path", "steps", "window"}
    assert tools["gap"].input_schema["required"] == ["path", "index"]
    assert tools["diff"].input_schema["required"] == ["after"]


def test_the_documents_are_the_repository_docs(answers: Answers) -> None:
    names = {r.name for r in answers["resources"]}
    assert names == {"causes.md", "findings.md"}
    docs = Path(__file__).resolve().parents[1] / "docs"
    for name in names:
        assert answers[f"resource:{name}"] == (docs / name).read_text(encoding="utf-8")


# -- one trace against tf analyze --json -----------------------------------------------------
@pytest.fixture(scope="module")
def cli_w0(world: dict[str, Any]) -> dict[str, Any]:
    return dict(_cli_json(["analyze", str(TRACES / W0)], world["root"], world["cli_cache"]))


def _without(d: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in keys}


def test_analyze_matches_the_cli_json(answers: Answers, cli_w0: dict[str, Any]) -> None:
    view = _ok(answers, "analyze")
    assert view["schema"] == cli_w0["schema"] and view["program"] == cli_w0["program"]
    assert 0 < len(view["findings"]) <= 5 < len(cli_w0["findings"])
    for got, want in zip(view["findings"], cli_w0["findings"], strict=False):
        assert _without(got, "evidence") == _without(want, "evidence")
        assert got["evidence"] == want["evidence"][:3]
    assert {"what": "findings", "shown": 5, "total": len(cli_w0["findings"])}.items() <= next(
        m for m in view["more"] if m["what"] == "findings"
    ).items()
    (to_gaps,) = [m for m in view["more"] if m["what"] == "gaps"]
    assert to_gaps["tool"] == "gaps" and to_gaps["total"] == len(cli_w0["gaps"])
    (dev,) = view["devices"]
    (want_dev,) = cli_w0["devices"]
    for key in ("window_ns", "busy_ns", "idle_ns", "top_cause", "mfu", "n_gaps", "name"):
        assert dev[key] == want_dev[key], key
    assert dev["idle_by_cause"] == {c: ns for c, ns in want_dev["idle_by_cause"].items() if ns}
    assert sum(dev["idle_by_cause"].values()) == want_dev["idle_ns"]
    assert list(dev["idle_by_cause"]) == sorted(
        dev["idle_by_cause"], key=lambda c: -dev["idle_by_cause"][c]
    )


def test_the_verdict_is_the_terminal_reports(answers: Answers, world: dict[str, Any]) -> None:
    text = _cli(
        ["analyze", str(TRACES / W0), "--sections", "verdict"], world["root"], world["cli_cache"]
    )
    assert text.returncode == 0, text.stderr
    shown = text.stdout.split("== Verdict ==\n", 1)[1].splitlines()
    verdict = _ok(answers, "analyze")["verdict"]
    assert verdict and verdict == shown[: len(verdict)]
    assert "data_loading" in verdict[0]


def test_a_relative_path_is_read_from_a_root(answers: Answers) -> None:
    assert _ok(answers, "analyze_rel")["findings"] == _ok(answers, "analyze")["findings"]


def test_steps_and_window_are_tf_analyzes_options(answers: Answers, world: dict[str, Any]) -> None:
    want = _cli_json(
        ["analyze", str(TRACES / W0), "--steps", "7:9", "--window", "trace"],
        world["root"],
        world["cli_cache"],
    )
    view = _ok(answers, "analyze_steps")
    assert view["range"] == want["range"] and view["range"]["steps"] == "7:9"
    assert [d["window_ns"] for d in view["devices"]] == [d["window_ns"] for d in want["devices"]]
    assert [f["recoverable_ns"] for f in view["findings"]] == [
        f["recoverable_ns"] for f in want["findings"][:5]
    ]
    assert view["devices"][0]["window_ns"] < _ok(answers, "analyze")["devices"][0]["window_ns"]
    command = next(m for m in view["more"] if "command" in m or "tool" in m)
    assert command["arguments"] == {"path": str(TRACES / W0), "steps": "7:9", "window": "trace"}


def test_findings_list_all_or_one_category(answers: Answers, cli_w0: dict[str, Any]) -> None:
    every = _ok(answers, "findings")
    assert every["total"] == len(cli_w0["findings"])
    assert [f["category"] for f in every["findings"]] == [f["category"] for f in cli_w0["findings"]]
    dl = _ok(answers, "findings_dl")
    want = [f for f in cli_w0["findings"] if f["category"] == "data_loading"]
    assert dl["total"] == len(want) >= 1
    assert [_without(f, "evidence") for f in dl["findings"]] == [
        _without(f, "evidence") for f in want
    ]
    line = _error(answers, "findings_bad")
    assert line.startswith("tf: error: category 'no_such_category'") and "data_loading" in line


def test_gaps_and_one_gap_match_the_cli_json(answers: Answers, cli_w0: dict[str, Any]) -> None:
    gaps = _ok(answers, "gaps")
    assert gaps["gaps_listed"] == len(cli_w0["gaps"])
    assert len(gaps["gaps"]) == 4
    for i, (row, want) in enumerate(zip(gaps["gaps"], cli_w0["gaps"], strict=False)):
        assert row["index"] == i
        assert (row["start_ns"], row["dur_ns"]) == (want["start_ns"], want["dur_ns"])
        assert row["causes"] == {c: ns for c, ns in want["causes"].items() if ns}
        assert sum(row["causes"].values()) == want["dur_ns"]  # every idle ns attributed
        assert row["evidence_events"] == len(want["evidence"])
    assert _ok(answers, "gap")["gap"] == cli_w0["gaps"][2]
    # paging: the next gaps from a start, and a pointer to the ones after
    page = _ok(answers, "gaps_page")
    assert [r["index"] for r in page["gaps"]] == [2, 3]
    assert [r["start_ns"] for r in page["gaps"]] == [g["start_ns"] for g in cli_w0["gaps"][2:4]]
    (nxt,) = [m for m in page["more"] if m["what"] == "gaps"]
    assert nxt["tool"] == "gaps" and nxt["arguments"]["start"] == 4 and nxt["arguments"]["top"] == 2
    (first,) = [m for m in gaps["more"] if m["what"] == "gaps"]
    assert first["arguments"]["start"] == 4 and first["total"] == page["gaps_total"]
    line = _error(answers, "gap_past")
    assert line.startswith("tf: error: gap 999999: ")


def test_kernels_match_the_cli_json(answers: Answers, cli_w0: dict[str, Any]) -> None:
    view = _ok(answers, "kernels")
    assert view["short_kernel_summary"] == cli_w0["short_kernel_summary"]
    assert view["short_kernels"] == cli_w0["short_kernels"][:3]
    assert view["mfu"] == cli_w0["mfu"]["devices"]
    assert view["top_kernels"][0]["kernels"] == cli_w0["devices"][0]["top_kernels"][:3]
    by_time = sorted(cli_w0["op_families"], key=lambda f: -f["kernel_ns"])[:3]
    assert view["op_families"] == by_time


# -- a rank directory ------------------------------------------------------------------------
def test_ranks_match_the_cli_json_of_the_directory(answers: Answers, world: dict[str, Any]) -> None:
    want = _cli_json(["analyze", str(TRACES / JOB)], world["root"], world["cli_cache"])["ranks"]
    got = _ok(answers, "ranks")
    ranks = got["ranks"]
    for key in ("world_size", "ranks_loaded", "straggler", "steps", "notes", "matched_collectives"):
        assert ranks[key] == want[key], key
    assert [r["rank"] for r in ranks["per_rank"]] == [r["rank"] for r in want["per_rank"]] == [0, 1]
    for row, ref in zip(ranks["per_rank"], want["per_rank"], strict=True):
        for key in ("step_time_ns_median", "idle_ns", "comm_wait_ns", "waits_most_for_rank"):
            assert row[key] == ref[key], key
    assert got["verdict"][0].startswith("job of 2 ranks")
    assert _ok(answers, "analyze_job")["verdict"] == got["verdict"]


# -- a diff pair -----------------------------------------------------------------------------
def test_diff_matches_tf_diff_json_and_its_gate(answers: Answers, world: dict[str, Any]) -> None:
    w0, w4 = str(TRACES / W0), str(TRACES / W4)
    rules = ["--fail-on", "step_time>+5%", "--fail-on", "idle<-10%"]
    run = _cli(["diff", w0, w4, "--json", *rules], world["root"], world["cli_cache"])
    want = json.loads(run.stdout)
    view = _ok(answers, "diff")
    assert view["verdict"] == want["verdict"] and view["verdict"]["outcome"] == "worked"
    assert view["before"] == want["before"] and view["after"] == want["after"]
    for name, fig in want["job"]["figures"].items():
        assert view["job"][name] == {k: fig[k] for k in view["job"][name]}, name
    assert view["findings"] == want["findings"][: len(view["findings"])]
    # the gate: the rule that broke for tf diff --fail-on (exit 1, one stderr line) broke here
    broken_cli = [
        ln.removeprefix("tf: fail-on: ")
        for ln in run.stderr.splitlines()
        if ln.startswith("tf: fail-on: ") and "note:" not in ln
    ]
    assert run.returncode == (1 if broken_cli else 0)
    assert [r["line"] for r in view["rules"] if r["broken"]] == broken_cli
    assert [r["rule"] for r in view["rules"]] == ["step_time>+5%", "idle<-10%"]
    assert view["gate"] == ("failed" if broken_cli else "passed")
    assert broken_cli  # idle fell by far more than 10%: that rule breaks
    for m in view["more"]:  # the command repeats the rules
        words = shlex.split(m["command"])
        assert {"--fail-on=step_time>+5%", "--fail-on=idle<-10%"} <= set(words)


def test_diff_against_a_stored_baseline(answers: Answers) -> None:
    view = _ok(answers, "diff_baseline")
    assert view["before"]["label"] == "baseline run=mcp-test"
    assert view["verdict"] == _ok(answers, "diff")["verdict"]


def test_history_lists_the_stored_run_and_a_trend(answers: Answers, world: dict[str, Any]) -> None:
    want = _cli_json(
        ["history", "--store", world["store"], "--label", "run=mcp-test"],
        world["root"],
        world["cli_cache"],
    )
    got = _ok(answers, "history")
    assert got["runs"] == want["runs"] and len(got["runs"]) == 1
    trend = _ok(answers, "trend")
    want_trend = _cli_json(
        ["history", "--store", world["store"], "--trend", "idle.data_loading"],
        world["root"],
        world["cli_cache"],
    )
    assert trend["points"] == want_trend["points"] and trend["figure"] == "idle.data_loading"


def test_explain_says_what_tf_explain_says(answers: Answers, world: dict[str, Any]) -> None:
    text = _cli(["explain", "host_sync"], world["root"], world["cli_cache"]).stdout
    got = _ok(answers, "explain")
    assert text.splitlines()[0] == f"host_sync: {got['meaning']}"
    for advice in got["what_to_do"].values():
        assert advice in text
    ids = [row["id"] for row in _ok(answers, "explain_all")["ids"]]
    listed = [
        ln.split()[0]
        for ln in _cli(["explain"], world["root"], world["cli_cache"]).stdout.splitlines()
    ]
    assert ids[: len(listed)] == listed and "gpu_activity_missing" in ids
    bad = _cli(["explain", "no_such_id"], world["root"], world["cli_cache"])
    assert _error(answers, "explain_bad") == bad.stderr.strip()


# -- confinement and errors ------------------------------------------------------------------
@pytest.mark.parametrize("key", ["outside", "escape", "dotdot", "ranks_escape"])
def test_a_path_outside_the_roots_is_refused(answers: Answers, key: str) -> None:
    line = _error(answers, key)
    assert "outside the folders this server may read" in line and line.startswith("tf: error: ")


def test_a_broken_trace_gets_the_cli_line_and_the_server_goes_on(
    answers: Answers, world: dict[str, Any]
) -> None:
    root = world["root"]
    for key, path in (("broken", "broken.json.gz"), ("broken_abs", str(root / "broken.json.gz"))):
        cli = _cli(["analyze", path, "--json"], root, world["cli_cache"])
        assert cli.returncode == 2
        assert _error(answers, key) == cli.stderr.strip(), key
    assert _ok(answers, "after_broken")["findings"] == _ok(answers, "analyze")["findings"]


def test_argument_errors_are_one_line_too(answers: Answers) -> None:
    assert _error(answers, "bad_type").startswith("tf: error: gap: index 'first': ")
    assert _error(answers, "missing_arg").startswith("tf: error: gap: index: Field required")
    assert _error(answers, "negative") == "tf: error: top -2: pass 1 or more"


def test_unknown_tools_and_empty_windows_are_one_line(answers: Answers) -> None:
    assert _error(answers, "no_tool").startswith("tf: error: no tool named 'no_such_tool'; ")
    assert _error(answers, "empty_window").startswith("tf: error: window '0:0': ")


def test_a_nsys_report_is_exported_into_the_cache(answers: Answers, world: dict[str, Any]) -> None:
    view = _ok(answers, "nsys_rep")
    assert view["source_format"] == "nsys" and view["inputs"] == ["run.nsys-rep"]
    assert view["devices"]
    exports = list((world["server_cache"] / "traceforensics" / "nsys").glob("run-*.tf.sqlite"))
    assert len(exports) == 1  # in the cache; nothing beside the report (test below)


def test_nothing_is_written_but_the_cache(answers: Answers, world: dict[str, Any]) -> None:
    assert answers["root_unchanged"]
    assert not any(world["outside"].glob("*.sqlite")) and len(list(world["outside"].iterdir())) == 1
    written = [p for p in world["server_cache"].rglob("*") if p.is_file()]
    assert any("results" in p.parts for p in written)  # the analyses were cached


def test_without_the_sdk_tf_mcp_says_what_to_install(tmp_path: Path) -> None:
    """No ``mcp`` package: one line naming the extra, exit 2 (a stub package that fails to
    import stands for the missing SDK)."""
    fake = tmp_path / "mcp"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('no SDK here', name='mcp')\n")
    env = os.environ | {"PYTHONPATH": str(tmp_path)}
    run = subprocess.run(
        [TF, "mcp"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().startswith("tf: error: tf mcp needs the Model Context Protocol SDK")
    assert "traceforensics[mcp]" in run.stderr and run.stderr.count("\n") == 1


def test_a_root_that_is_not_a_folder_is_refused(tmp_path: Path) -> None:
    run = subprocess.run(
        [TF, "mcp", "--root", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2 and run.stderr.startswith("tf: error: --root ")
