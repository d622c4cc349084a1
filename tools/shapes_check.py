"""The invariants every drawn trace shape (``shapes.py``) must keep, checked on one example.

``problems(shape, folder, cli=...)`` writes the shape, loads and analyses it through the public
API (and, with ``cli``, through ``tf analyze --no-cache --json`` in-process) and returns what
is wrong, one line each (empty when nothing is):

- it loads and analyses with no exception, the CLI exits 0, no warning or diagnostic says a
  pass failed (``analysis_failed``, "internal error");
- busy per ``(rank, device)`` equals ``Shape.expected_busy`` (a plain union of the drawn GPU
  intervals); every device with recorded work is reported;
- ``busy + idle = window`` and the idle causes sum exactly to idle, per device, step and gap;
- findings are sorted by ``recoverable_ns``, largest first;
- the JSON has plain JSON types and the documented fields (``tests/json_contract.py``);
- each pass called alone on the session (``analyze_idle`` ...) equals ``analyze()``'s part.

The test suite (``tests/test_trace_shapes.py``) and the long profile (``shapes_long.py``) share
it, so both check one definition.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the JSON contract's field lists live with the tests
    sys.path.insert(0, str(ROOT))

from tests.json_contract import (  # noqa: E402
    DEVICE_FIELDS,
    EVIDENCE_FIELDS,
    FINDING_FIELDS,
    GAP_FIELDS,
    STEP_FIELDS,
)

from shapes import Shape, cli_options  # noqa: E402
from traceforensics.analysis import (  # noqa: E402
    AnalysisOptions,
    analyze,
    analyze_idle,
    analyze_kernels,
    analyze_utilization,
)
from traceforensics.analysis.idle.causes import CAUSES  # noqa: E402
from traceforensics.ingest import load_path  # noqa: E402

FAILED_WORDS = ("analysis_failed", "internal error")
_PLAIN = (str, int, float, bool, type(None))
#: ``utilization`` is only written for a device with a utilization timeline
_DEVICE_ALWAYS = DEVICE_FIELDS - {"utilization"}


def problems(shape: Shape, folder: Path, *, cli: bool = False, alone: bool = True) -> list[str]:
    """What is wrong with the analysis of ``shape`` written under ``folder`` ([] = nothing);
    ``cli``: through ``tf analyze`` too; ``alone``: each pass alone too."""
    return written_problems(shape, shape.write(folder), cli=cli, alone=alone)


def written_problems(
    shape: Shape, path: Path, *, cli: bool = False, alone: bool = True
) -> list[str]:
    """``problems`` of ``shape`` already written at ``path``."""
    session = load_path(path)
    opts = AnalysisOptions.of(**shape.options)
    res = analyze(session, opts)
    doc = res.to_json()
    out = _failed(doc)
    out += _busy(shape, doc)
    out += _windows(shape, doc)
    out += _sums(doc)
    out += _contract(doc)
    out += _alone(session, opts, res) if alone else []
    if cli:
        out += _cli(path, cli_options(shape.options), doc)
    return out


def _failed(doc: dict[str, Any]) -> list[str]:
    notes = [str(w) for w in doc.get("warnings", [])]
    notes += [json.dumps(d) for d in doc.get("diagnostics", [])]
    return [f"pass failed: {n}" for n in notes if any(w in n.lower() for w in FAILED_WORDS)]


def _busy(shape: Shape, doc: dict[str, Any]) -> list[str]:
    """Busy and window per device against the plain reference; the devices reported are
    exactly those with a GPU work record (zero-length work included)."""
    busy, window = shape.expected_busy(), shape.expected_window()
    got = {(d["rank"], d["device"]): d for d in doc["devices"]}
    out = (
        [f"devices {sorted(got)} != devices with work {sorted(busy)}"]
        if set(got) != set(busy)
        else []
    )
    for key, d in got.items():
        if d["busy_ns"] != busy.get(key, 0):
            out.append(f"device {key}: busy {d['busy_ns']} != union {busy.get(key, 0)}")
        if shape.options.get("window", "device") == "device" and d["window_ns"] != window.get(
            key, 0
        ):
            out.append(f"device {key}: window {d['window_ns']} != {window.get(key, 0)}")
    return out


def _windows(shape: Shape, doc: dict[str, Any]) -> list[str]:
    """Each step's busy is the plain union of the work inside it; a gap holds no work of
    positive length."""
    off, out = shape.offset_ns(), []
    for s in doc["steps"]:
        lo = s["start_ns"] - off
        want = shape.busy_in((s["rank"], s["device"]), lo, lo + s["dur_ns"])
        if s["busy_ns"] != want:
            out.append(f"step {s['name']} on {s['device']}: busy {s['busy_ns']} != union {want}")
    for g in doc["gaps"]:
        lo = g["start_ns"] - off
        if shape.busy_in((g["rank"], g["device"]), lo, lo + g["dur_ns"]):
            out.append(f"gap at {lo} (+{g['dur_ns']}) on {g['device']} overlaps GPU work")
    return out


def _sums(doc: dict[str, Any]) -> list[str]:
    out = []
    for d in doc["devices"]:
        key = (d["rank"], d["device"])
        if d["busy_ns"] + d["idle_ns"] != d["window_ns"] or min(d["busy_ns"], d["idle_ns"]) < 0:
            out.append(f"device {key}: busy {d['busy_ns']} + idle {d['idle_ns']} != window")
        if sum(d["idle_by_cause"].values()) != d["idle_ns"]:
            out.append(f"device {key}: causes {d['idle_by_cause']} != idle {d['idle_ns']}")
        if any(v < 0 for v in d["idle_by_cause"].values()):
            out.append(f"device {key}: negative cause {d['idle_by_cause']}")
    for s in doc["steps"]:
        if (
            sum(s["idle_by_cause"].values()) != s["idle_ns"]
            or s["busy_ns"] + s["idle_ns"] != s["dur_ns"]
        ):
            out.append(f"step {s['name']}: busy/idle/causes do not add up: {s}")
    for g in doc["gaps"]:
        if sum(g["causes"].values()) != g["dur_ns"] or g["dur_ns"] <= 0:
            out.append(f"gap at {g['start_ns']}: causes {g['causes']} != {g['dur_ns']}")
    out += _rank_sums(doc)
    # by recoverable time, one-off work after the steady findings while one of them is not
    # minor (findings.results.ranked)
    found = doc["findings"]
    major = any(f["category"] != "one_off" and not f["minor"] for f in found)
    back = [(major and f["category"] == "one_off", -f["recoverable_ns"]) for f in found]
    if back != sorted(back):
        out.append(f"findings not ranked: {[(f['category'], f['recoverable_ns']) for f in found]}")
    return out


def _rank_sums(doc: dict[str, Any]) -> list[str]:
    """A rank's collective wait and transfer add up to its collective time, within its busy."""
    out = []
    for r in (doc.get("ranks") or {}).get("per_rank", []):
        key = (r["rank"], r["device"])
        if not 0 <= r["comm_wait_ns"] <= r["comm_ns"] <= r["busy_ns"]:
            out.append(f"rank {key}: wait {r['comm_wait_ns']} / comm {r['comm_ns']} / busy")
        if r["comm_wait_ns"] + r["comm_transfer_ns"] != r["comm_ns"]:
            out.append(f"rank {key}: wait + transfer != comm {r['comm_ns']}")
    return out


def _contract(doc: dict[str, Any]) -> list[str]:
    out = _not_plain(doc)
    try:
        json.dumps(doc, allow_nan=False)
    except ValueError as exc:
        out.append(f"JSON: {exc}")
    if doc.get("schema") != "traceforensics.analysis/1":
        out.append(f"schema {doc.get('schema')!r}")
    checks = [(doc["devices"], _DEVICE_ALWAYS, "device"), (doc["steps"], STEP_FIELDS, "step")]
    checks += [(doc["gaps"], GAP_FIELDS, "gap"), (doc["findings"], FINDING_FIELDS, "finding")]
    checks += [([e for g in doc["gaps"] for e in g["evidence"]], EVIDENCE_FIELDS, "evidence")]
    for rows, fields, what in checks:
        out += [f"{what} misses {sorted(fields - set(r))}" for r in rows if not fields <= set(r)]
    for d in doc["devices"]:
        if set(d["idle_by_cause"]) != set(CAUSES):
            out.append(f"device idle_by_cause keys {sorted(d['idle_by_cause'])}")
    windows = {(d["rank"], d["device"]): d["window_ns"] for d in doc["devices"]}
    for f in doc["findings"]:
        win = windows.get((f["rank"], f["device"]))
        if win is None or not 0 < f["recoverable_ns"] <= win:
            out.append(f"finding {f['category']}: {f['recoverable_ns']} ns, window {win}")
    return out


def _not_plain(obj: Any, where: str = "") -> list[str]:
    if isinstance(obj, dict):
        bad = [f"{where}/{k!r}: key not str" for k in obj if not isinstance(k, str)]
        return bad + [p for k, v in obj.items() for p in _not_plain(v, f"{where}/{k}")]
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj) for p in _not_plain(v, f"{where}[{i}]")]
    if type(obj) not in _PLAIN:
        return [f"{where}: {type(obj).__name__} is not a JSON type"]
    return [f"{where}: {obj}"] if isinstance(obj, float) and not math.isfinite(obj) else []


def _alone(session: Any, opts: AnalysisOptions, res: Any) -> list[str]:
    pairs = [
        ("idle", analyze_idle(session, opts), res.idle),
        ("kernels", analyze_kernels(session, opts), res.kernels),
        ("utilization", analyze_utilization(session, opts), res.patterns),
    ]
    return [f"{n}: alone != analyze()" for n, a, b in pairs if canonical(a) != canonical(b)]


def canonical(obj: Any) -> Any:
    """Plain, comparable form of a pass result (dataclasses, numpy arrays, polars frames)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: canonical(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [canonical(v) for v in obj]
    if isinstance(obj, np.ndarray | np.generic):
        return obj.tolist()
    return obj.to_dicts() if hasattr(obj, "to_dicts") else obj  # a polars frame


def run_tf(argv: list[str]) -> tuple[int, str, str]:
    """``tf argv`` in this process: (exit code, stdout, stderr)."""
    from traceforensics.cli.main import main

    # the CLI writes JSON to ``sys.stdout.buffer``: text streams over bytes, as a console's
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8") for _ in range(2))
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    texts = []
    for stream in (out, err):
        stream.flush()
        texts.append(stream.buffer.getvalue().decode())
    return code, texts[0], texts[1]


def _cli(path: Path, flags: list[str], lib: dict[str, Any]) -> list[str]:
    # ``--jobs 1``: a rank directory's ranks analysed apart and merged in this process (the
    # fan-out's own path, without starting worker processes per example)
    code, out, err = run_tf(["analyze", str(path), "--no-cache", "--json", "--jobs", "1", *flags])
    if code != 0:
        return [f"tf analyze exit {code}: {err.strip()[-300:]}"]
    doc = json.loads(out)
    got = [(d["rank"], d["device"], d["busy_ns"], d["idle_by_cause"]) for d in doc["devices"]]
    want = [(d["rank"], d["device"], d["busy_ns"], d["idle_by_cause"]) for d in lib["devices"]]
    return _failed(doc) + ([] if got == want else [f"CLI devices {got} != library {want}"])


__all__ = ["FAILED_WORDS", "canonical", "problems", "run_tf", "written_problems"]
