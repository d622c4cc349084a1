"""Progress of long loads (issue 12): phase texts from the ingesters, drawn on a terminal's
stderr only (never when piped or with --json); --json runs also print the warnings on stderr."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT, run_cli
from traceforensics.ingest import load_path
from traceforensics.ingest.progress import listening, report
from traceforensics.report.progress import progress_line

EXAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_loads_report_their_phases_in_order() -> None:
    seen: list[str] = []
    with listening(seen.append):
        load_path(EXAMPLE)
        load_path(FIXTURES / "nsys" / "modern.sqlite")
    kinds = [t.split(" ")[0] for t in seen]
    # the Kineto file is streamed: read (and decoded) piece by piece, then the table is built
    building = kinds.index("building")
    assert building >= 1 and set(kinds[:building]) == {"reading"}, seen
    assert "170221" not in seen[0] and "of" in seen[0]  # sizes in MB
    assert seen[-1].startswith("reading the export modern.sqlite")
    report("nobody listens")  # outside the block: a no-op


def test_line_is_drawn_on_a_terminal_then_erased() -> None:
    out = _Tty()
    with progress_line(enabled=True, stream=out, delay_s=0.0):
        report("reading big.json.gz: 120 of 300 MB")
        time.sleep(0.8)  # at least one redraw after the report (every 0.5 s)
    text = out.getvalue()
    assert "\r\x1b[Ktf: reading big.json.gz: 120 of 300 MB (" in text
    assert text.endswith("\r\x1b[K")  # erased: the report starts on a clean line


@pytest.mark.parametrize(("tty", "enabled"), [(False, True), (True, False)])
def test_nothing_when_piped_or_disabled(tty: bool, enabled: bool) -> None:
    out = _Tty() if tty else io.StringIO()
    with progress_line(enabled=enabled, stream=out, delay_s=0.0):
        report("reading")
        time.sleep(0.1)
    assert out.getvalue() == ""


def test_short_loads_stay_silent() -> None:
    out = _Tty()
    with progress_line(enabled=True, stream=out, delay_s=5.0):
        report("reading")
    assert out.getvalue() == ""


def test_json_runs_print_warnings_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = EXAMPLE.read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(raw[: len(raw) // 2])
    code, out, err = run_cli(["analyze", "--json", "--no-cache", str(cut)], capsys)
    assert code == 0
    warnings = json.loads(out)["warnings"]
    lines = err.strip().splitlines()
    assert warnings and lines == [f"tf: warning: {w}" for w in warnings]
