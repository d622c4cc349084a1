"""Every reporter on the edge traces (issue 13): the terminal report (default, ``--sections
all`` and each section alone), ``--json``, ``--markdown``, ``--report x.html``, ``--report x.md``
and ``--plot x.png``, each through the CLI, on a CPU-only trace, a single-kernel trace, an 84 ms
trace and a 40 s trace (``tests/edge_traces.py``: synthetic ones always, recorded ones from
``../shared`` when present).

Each output is checked for what could go wrong: exit code 0 and no traceback; the JSON's busy,
window and idle equal a plain-Python interval union of the GPU events read straight from the
synthetic trace file; the HTML is balanced, self-contained (every image a data URI) and holds no
``<script``; every Markdown table keeps one column count; the PNGs are PNG files of a real size.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import struct
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import plain_union, run_cli, shared_trace
from tests.edge_traces import REAL, SYNTH
from traceforensics.analysis.idle.causes import CAUSES
from traceforensics.report.plots import FIGURES
from traceforensics.report.tables import EMPTY
from traceforensics.report.terminal import SECTIONS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
NAMES = [*SYNTH, *REAL]
# the heading each terminal section prints (``report.terminal.render_text``)
HEADINGS = {
    "verdict": "== Verdict ==",
    "method": "== Investigation",
    "findings": "== Findings",
    "devices": "== Devices ==",
    "idle": "== Idle time by cause ==",
    "gaps": "== Largest idle gaps ==",
    "steps": "== Steps ==",
    "pattern": "== Utilization pattern ==",
    "kernels": "== Kernels ==",
    "serving": "== Serving ==",  # issue 48: a server's iterations, memory over time
    "memory": "== Memory ==",
}
#: Sections shown only when the trace has what they describe.
SHOWN_IF = ("serving", "memory")


@pytest.fixture(scope="module")
def synth_paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("edge")
    return {n: build().write_kineto(base / f"{n}.pt.trace.json") for n, build in SYNTH.items()}


def _trace(name: str, synth_paths: dict[str, Path]) -> tuple[str, list[str]]:
    """The trace's path and the options it is analysed with."""
    if name in synth_paths:
        return str(synth_paths[name]), []
    rel, kw = REAL[name]
    path = shared_trace(rel)
    return str(path), [a for k, v in kw.items() for a in (f"--{k}", str(v))]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = run_cli(["analyze", *argv], capsys)
    assert code == 0, err
    assert "Traceback" not in err + out
    return out


def _gpu_union(path: str) -> list[list[int]]:
    """GPU work intervals (ns) of a synthetic Kineto file, read with ``json`` alone: ts/dur are
    µs with three decimals, parsed as decimals so no float rounding moves a nanosecond."""
    obj = json.loads(Path(path).read_text(), parse_float=Decimal)
    spans = []
    for e in obj["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS:
            start = int(Decimal(e["ts"]) * 1000)
            spans.append((start, start + int(Decimal(e["dur"]) * 1000)))
    return plain_union(spans)


def _is_cpu_only(name: str) -> bool:
    return "cpu_only" in name


# ------------------------------------------------------------------------------ terminal


@pytest.mark.parametrize("name", NAMES)
def test_terminal_report(
    name: str, synth_paths: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path, extra = _trace(name, synth_paths)
    out = _run([path, *extra], capsys)
    lines = out.splitlines()
    assert lines[0].startswith("traceforensics · ") and Path(path).name in lines[0]
    if _is_cpu_only(name):
        assert "No GPU activity in this trace (CPU-only)" in out and "== " not in out
        return
    headings = [line for line in lines if line.startswith("== ")]
    # (a server's iterations and memory over time only where the trace has them)
    shown = {s for s in ("serving", "memory") if HEADINGS[s] in out}
    want = [HEADINGS[s] for s in SECTIONS if s in HEADINGS and (s not in SHOWN_IF or s in shown)]
    assert [next(w for w in want if h.startswith(w)) for h in headings] == want, headings
    # a verdict line per device, and `--sections all` is the default
    assert re.search(r"^rank \d+ GPU \d+: idle \d+\.\d% of a .+ window", out, re.M)
    assert "]  (" not in out  # an evidence line without its name ("[none]  (1 ms)")
    for i, line in enumerate(lines):  # no section heading without a line under it
        if line.startswith("== "):
            assert i + 1 < len(lines) and lines[i + 1].strip(), line
    assert _run([path, *extra, "--sections", "all"], capsys) == out


@pytest.mark.parametrize("name", NAMES)
def test_each_terminal_section_alone(
    name: str, synth_paths: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path, extra = _trace(name, synth_paths)
    full = _run([path, *extra], capsys)
    for sid in SECTIONS[1:]:
        out = _run([path, *extra, "--sections", sid], capsys)
        heads = [line for line in out.splitlines() if line.startswith("== ")]
        if _is_cpu_only(name):
            assert out == full  # nothing to choose from: the same one-line answer
        elif sid in ("monitor", "ranks"):  # no --monitor log / one rank: the verdict only
            assert heads == ["== Verdict =="]
        elif sid in ("serving", "memory") and HEADINGS[sid] not in full:
            assert heads == ["== Verdict =="]  # not a server / no memory events: nothing
        else:
            assert heads[0] == "== Verdict ==" and len(heads) == 2
            assert heads[1].startswith(HEADINGS[sid])
            # the section is the full report's section, line for line
            body = out.split(heads[1], 1)[1]
            assert heads[1] + body in full


# ---------------------------------------------------------------------------------- JSON


@pytest.mark.parametrize("name", NAMES)
def test_json(name: str, synth_paths: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    path, extra = _trace(name, synth_paths)
    obj = json.loads(_run(["--json", "--no-cache", path, *extra], capsys))
    assert obj["schema"] == "traceforensics.analysis/1"
    devices: list[dict[str, Any]] = obj["devices"]
    if _is_cpu_only(name):
        assert devices == [] and obj["gaps"] == [] and obj["findings"] == []
        return
    assert devices
    for d in devices:
        assert d["idle_ns"] == d["window_ns"] - d["busy_ns"] >= 0
        assert set(d["idle_by_cause"]) == set(CAUSES)
        assert sum(d["idle_by_cause"].values()) == d["idle_ns"]
        assert all(0.0 <= v <= 1.0 + 1e-9 for v in d["utilization"]["values"])
    if name in synth_paths:  # known times: check against an independent union
        union = _gpu_union(path)
        (d,) = devices
        assert d["busy_ns"] == sum(e - s for s, e in union)
        assert d["window_ns"] == union[-1][1] - union[0][0]
        gaps = sorted((b[0] - a[1] for a, b in itertools.pairwise(union)), reverse=True)
        assert d["idle_ns"] == sum(gaps)
        assert [g["dur_ns"] for g in obj["gaps"]] == gaps[: len(obj["gaps"])]
        assert d["kernel_count"] + d["memcpy_count"] + d["memset_count"] == sum(
            1
            for e in json.loads(Path(path).read_text())["traceEvents"]
            if e.get("ph") == "X" and e.get("cat") in GPU_CATS
        )


# ------------------------------------------------------------------------------ Markdown


def _md_tables(text: str) -> list[list[str]]:
    """Each table of a Markdown document as its lines; checks a blank line before each (else
    the table would be read as part of the paragraph above)."""
    lines = text.splitlines()
    tables: list[list[str]] = []
    for i, line in enumerate(lines):
        if line.startswith("|"):
            if i and lines[i - 1].startswith("|"):
                tables[-1].append(line)
            else:
                assert i == 0 or lines[i - 1] == "", (lines[i - 1], line)
                tables.append([line])
    return tables


def _md_columns(row: str) -> int:
    assert row.startswith("| ") or row.startswith("|-"), row
    assert row.endswith("|") and not row.endswith("\\|"), row
    return len(re.split(r"(?<!\\)\|", row)) - 2


def _check_markdown(text: str, name: str) -> None:
    assert text.startswith("# traceforensics report\n") and "- tool: traceforensics " in text
    if _is_cpu_only(name):
        assert "No GPU activity in this trace (CPU-only)." in text and "|" not in text
        return
    assert "## Verdict" in text and "\n- **rank " in text
    tables = _md_tables(text)
    assert len(tables) >= 2  # devices and busy time, at least
    for heading, empty in (("## Idle time by cause", "causes"), ("## Largest gaps", "gaps")):
        section = text.split(heading, 1)[1].split("\n## ", 1)[0]
        assert ("\n| " in section) != (EMPTY[empty] in section), section  # a table or a sentence
    for table in tables:
        # a header, its rule and at least one row: an empty table is a sentence instead
        assert len(table) >= 3 and re.fullmatch(r"\|(---\|)+", table[1]), table[:2]
        counts = {_md_columns(row) for row in table}
        assert counts == {table[1].count("---")}, table
        for row in table[2:]:  # no cell with a missing name ("kind  (1 ms)", ": detail")
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
            assert not any("  " in c or c.startswith(":") for c in cells), row


@pytest.mark.parametrize("name", NAMES)
def test_markdown(
    name: str, synth_paths: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, extra = _trace(name, synth_paths)
    md = tmp_path / "summary.md"
    _run([path, *extra, "--markdown", str(md)], capsys)
    text = md.read_text(encoding="utf-8")
    _check_markdown(text, name)
    assert "## Figures" not in text and not list(tmp_path.glob("*.png"))  # no --plot: no links


@pytest.mark.parametrize("name", NAMES)
def test_markdown_report_with_its_figures(
    name: str, synth_paths: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, extra = _trace(name, synth_paths)
    md = tmp_path / "rep" / "r.md"
    md.parent.mkdir()
    _run([path, *extra, "--report", str(md)], capsys)
    text = md.read_text(encoding="utf-8")
    _check_markdown(text, name)
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    written = sorted(p.name for p in md.parent.glob("*.png"))
    assert sorted(links) == written  # every figure linked is there, and only those
    if _is_cpu_only(name):
        assert links == []
        return
    assert {"r.png", "r.timeline.png"} <= set(links)
    for link in links:
        _check_png((md.parent / link).read_bytes())


# ---------------------------------------------------------------------------------- HTML


class _Html(HTMLParser):
    """Collects the tag structure: unclosed or mismatched elements, scripts, image sources."""

    VOID = frozenset({"meta", "img", "br", "hr", "link", "input"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: list[str] = []
        self.srcs: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        a = dict(attrs)
        if tag == "img":
            self.srcs.append(a.get("src") or "")
        self.links += [v or "" for k, v in attrs if k in ("href", "src") and tag != "img"]
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()


@pytest.mark.parametrize("name", NAMES)
def test_html_report(
    name: str, synth_paths: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, extra = _trace(name, synth_paths)
    out = tmp_path / "x.html"
    _run([path, *extra, "--report", str(out)], capsys)
    text = out.read_text(encoding="utf-8")
    assert "<script" not in text.lower()
    parser = _Html()
    parser.feed(text)
    parser.close()
    assert parser.errors == [] and parser.stack == []
    assert parser.tags[:3] == ["html", "head", "meta"] and "script" not in parser.tags
    assert parser.links == []  # nothing fetched to view it
    if _is_cpu_only(name):
        assert "No GPU activity in this trace (CPU-only)" in text and parser.srcs == []
        return
    assert "<h2>Verdict</h2>" in text and "<h2>Idle time by cause</h2>" in text
    # no cell or evidence item with a missing name ("kind  (1 ms)", ": detail")
    tables = re.findall(r"<table>.*?</table>", text)
    assert tables and all("<td" in table for table in tables)  # no table without a row
    missing = re.findall(r".{60}(?:<td[^>]*>:|; :|  \().{40}", text)
    assert missing == []
    assert parser.srcs, "no figure embedded"
    for src in parser.srcs:
        head, _, data = src.partition(",")
        assert head == "data:image/png;base64"
        _check_png(base64.b64decode(data, validate=True))


# --------------------------------------------------------------------------------- plots


def _check_png(data: bytes) -> None:
    """A PNG file (magic bytes and an IHDR chunk) of a real figure's size."""
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 300 and height >= 150, (width, height)
    assert len(data) > 2_000


@pytest.mark.parametrize("name", NAMES)
def test_plot(
    name: str, synth_paths: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, extra = _trace(name, synth_paths)
    png = tmp_path / "x.png"
    _run([path, *extra, "--plot", str(png)], capsys)
    # every figure is written, those with nothing to draw as a panel that says why
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["x.png", *(f"x.{n}.png" for n in FIGURES)]
    )
    blobs = set()
    for p in tmp_path.iterdir():
        data = p.read_bytes()
        _check_png(data)
        blobs.add(data)
    assert len(blobs) == 1 + len(FIGURES)  # five different figures, not one copied


@pytest.mark.parametrize("name", list(SYNTH))
def test_every_output_at_once(
    name: str, synth_paths: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """All the reporters in one run: the Markdown links the figures ``--plot`` wrote, and the
    text on stdout is the same as without the files."""
    path, _ = _trace(name, synth_paths)
    md, png, page = tmp_path / "m.md", tmp_path / "p.png", tmp_path / "h.html"
    argv = [path, "--markdown", str(md), "--plot", str(png), "--report", str(page)]
    assert _run(argv, capsys) == _run([path], capsys)
    text = md.read_text(encoding="utf-8")
    _check_markdown(text, name)
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert all((tmp_path / link).is_file() for link in links)
    assert bool(links) == (not _is_cpu_only(name))
    assert "<script" not in page.read_text(encoding="utf-8").lower()
