"""What the history tests share: the two backends, analysis documents, plain-Python references
of the job figures, and raw reads of the tables (independent of ``history.query``).

The stored job figures (``tf_figures``) are checked twice: against
``traceforensics.compare.analysis_figures`` itself (what the store must hold: the one
definition) and against ``plain_figures``, a recomputation in plain loops from the document's
``devices[]``, ``steps[]`` and ``mfu.devices[]`` (so a wrong definition in compare shows too).

``store_url`` is parametrized: every test taking it runs on SQLite and on the PostgreSQL
server of ``tests.pg_server`` (import ``pg_server`` and ``pg_url`` beside it).
"""

from __future__ import annotations

import copy
import functools
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import fmean, median, quantiles
from typing import Any

import pytest
import sqlalchemy as sa

from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"
RUN_TABLES = (
    "tf_runs",
    "tf_inputs",
    "tf_labels",
    "tf_devices",
    "tf_idle",
    "tf_figures",
    "tf_findings",
    "tf_documents",
)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty store on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.sqlite'}"
    return str(request.getfixturevalue("pg_url"))


@functools.cache
def _analysed(path: str) -> str:
    import traceforensics as tf

    return json.dumps(tf.analyze(path).to_json())


def analysis_document(path: Path = EXAMPLE) -> dict[str, Any]:
    """The ``tf analyze --json`` document of ``path`` (analysed once per process; a copy)."""
    return dict(json.loads(_analysed(str(path))))


def variant(doc: dict[str, Any], k: int) -> dict[str, Any]:
    """A copy of ``doc`` whose figures differ by ``k``: data-loading idle moved to busy
    (k x 0.5 ms per device, k x 50 µs per step), every step k x 0.1 ms shorter, FLOPs scaled
    by 1 + k/10, and a warning naming ``k`` (to tell the documents apart)."""
    out = copy.deepcopy(doc)
    for rows, ns in ((out["devices"], k * 500_000), (out["steps"], k * 50_000)):
        for row in rows:
            moved = min(ns, row["idle_by_cause"]["data_loading"])
            row["idle_by_cause"]["data_loading"] -= moved
            row["idle_ns"] -= moved
            row["busy_ns"] += moved
    for s in out["steps"]:
        s["dur_ns"] -= k * 100_000
    for m in out["mfu"]["devices"]:
        if m.get("flops") is not None:
            m["flops"] *= 1 + k / 10
    out["warnings"] = [*out["warnings"], f"variant {k}"]
    return out


#: Device fields behind each time figure, and the step fields of those ``steps[]`` carries.
_DEVICE_FIELDS = {
    "idle": "idle_ns",
    "busy": "busy_ns",
    "comm": "comm_ns",
    "comm.exposed": "exposed_comm_ns",
    "copy.exposed": "exposed_copy_ns",
}
_STEP_FIELDS = {
    "idle": "idle_ns",
    "busy": "busy_ns",
    "comm": "comm_ns",
    "comm.exposed": "exposed_comm_ns",
}


def _job_steps(doc: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Each device's steps in start order, cut to the fewest any device has."""
    series = []
    for d in doc["devices"]:
        own = [s for s in doc["steps"] if (s["rank"], s["device"]) == (d["rank"], d["device"])]
        series.append(sorted(own, key=lambda s: s["start_ns"]))
    n = min((len(s) for s in series), default=0)
    return [s[:n] for s in series]


def _step_part(step: dict[str, Any], name: str) -> float:
    if name.startswith("idle."):
        return float(step["idle_by_cause"].get(name.removeprefix("idle."), 0))
    return float(step[_STEP_FIELDS[name]])


def plain_figures(doc: dict[str, Any]) -> dict[str, tuple[float | None, float | None]]:
    """The job's figures as (value, share), recomputed with plain loops (docs/diff.md):
    time figures summed over the devices; per step (the mean over step positions of the
    devices' summed step values, or the window total over the steps for figures ``steps[]``
    lacks) when every device has steps, else the window total; share = total / Σ window_ns;
    step time from the slowest device per step position (median, mean, Q3 - Q1 as numpy's
    default quantiles); MFU = Σ FLOPs / Σ capacity."""
    devices = doc["devices"]
    window = sum(d["window_ns"] for d in devices)
    totals = {name: float(sum(d[f] or 0 for d in devices)) for name, f in _DEVICE_FIELDS.items()}
    for c in devices[0]["idle_by_cause"]:
        totals[f"idle.{c}"] = float(sum(d["idle_by_cause"][c] for d in devices))
    for kind in ("kernel", "communication", "memcpy", "memset"):
        totals[f"busy.{kind}"] = float(sum(d["busy_by_kind"].get(kind, 0) for d in devices))
    steps = _job_steps(doc)
    n = len(steps[0]) if steps else 0
    out: dict[str, tuple[float | None, float | None]] = {}
    for name, total in totals.items():
        share = total / window if window else None
        if not n:
            out[name] = (total, share)
        elif name in _STEP_FIELDS or name.startswith("idle."):
            out[name] = (fmean(sum(_step_part(s[k], name) for s in steps) for k in range(n)), share)
        else:
            out[name] = (total / n, share)
    durations = [max(s[k]["dur_ns"] for s in steps) for k in range(n)]
    out["step_time"] = (float(median(durations)) if n else None, None)
    out["step_time.mean"] = (fmean(durations) if n else None, None)
    quartiles = quantiles(durations, n=4, method="inclusive") if n > 1 else [0.0, 0.0, 0.0]
    out["step_time.iqr"] = (quartiles[2] - quartiles[0] if n else None, None)
    flops = capacity = 0.0
    for m in doc["mfu"]["devices"]:
        if m.get("flops") is not None and (m.get("peak_tflops") or 0) > 0:
            flops += m["flops"]
            capacity += m["peak_tflops"] * m["window_ns"] * 1e3  # TFLOPS x ns -> FLOP
    out["mfu"] = (flops / capacity if capacity else None, None)
    return out


def close(got: float | None, want: float | None) -> bool:
    """Both unknown, or equal to 1e-9 relative (a float sum in another order)."""
    if got is None or want is None:
        return got is None and want is None
    return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)


def written(value: float | None, unit: str) -> float | int | None:
    """A figure as the JSON contract writes it (docs/json-output.md): times integer ns,
    fractions (MFU, shares: ``unit`` ``fraction``) to 6 decimals."""
    if value is None:
        return None
    return round(value, 6) if unit == "fraction" else round(value)


def stored_figures(url: str, run_id: int) -> dict[str, dict[str, Any]]:
    """The ``tf_figures`` rows of one run by name, read with plain SQL."""
    return {r["name"]: r for r in table_rows(url, "tf_figures") if r["run_id"] == run_id}


def check_stored_figures(url: str, run_id: int, doc: dict[str, Any]) -> None:
    """The run's stored figures are exactly compare's, every name with its unit and basis, and
    agree with the plain recomputation."""
    from traceforensics.compare import analysis_figures

    stored = stored_figures(url, run_id)
    want = analysis_figures(doc)
    assert sorted(stored) == sorted(want), set(stored) ^ set(want)
    for name, d in want.items():
        row = stored[name]
        assert (row["unit"], row["basis"]) == (d.unit, d.basis), name
        assert close(row["value"], d.after), (name, row["value"], d.after)
        assert close(row["share"], d.share_after), (name, row["share"], d.share_after)
    plain = plain_figures(doc)
    assert sorted(plain) == sorted(want)  # every figure recomputed
    for name, (value, share) in plain.items():
        row = stored[name]
        assert close(row["value"], value), (name, row["value"], value)
        assert close(row["share"], share), (name, row["share"], share)


@contextmanager
def _connected(url: str) -> Iterator[sa.Connection]:
    """A plain SQLAlchemy connection to the store (none of the history code's set-up)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def table_rows(url: str, table: str) -> list[dict[str, Any]]:
    """Every row of one table, read with plain SQL."""
    with _connected(url) as conn:
        return [dict(r._mapping) for r in conn.execute(sa.text(f"SELECT * FROM {table}"))]


def _count(conn: sa.Connection, sql: str) -> int:
    return int(conn.execute(sa.text(sql)).scalar_one())


def counts(url: str) -> dict[str, int]:
    """Rows per run table."""
    with _connected(url) as conn:
        return {t: _count(conn, f"SELECT count(*) FROM {t}") for t in RUN_TABLES}


def orphans(url: str) -> dict[str, int]:
    """Rows of each child table whose run does not exist (a partial run would leave some)."""
    missing_run = "run_id NOT IN (SELECT id FROM tf_runs)"
    with _connected(url) as conn:
        return {
            t: _count(conn, f"SELECT count(*) FROM {t} WHERE {missing_run}") for t in RUN_TABLES[1:]
        }
