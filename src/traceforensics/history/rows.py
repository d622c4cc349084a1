"""A ``traceforensics.analysis/1`` document as the rows of one stored run, and back.

The device, idle and finding rows copy figures out of the document unchanged (``devices[]``,
``step_summary[]``, ``findings[]``): the evidence, per device. The job's figures are the ones
``compare`` computes (``history.figures``: ``tf_figures``); nothing here adds devices up. The
whole document is kept too, compressed, so nothing is lost to the columns chosen here.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa

from traceforensics.compare.figures import SCHEMA_ANALYSIS
from traceforensics.history.figures import figure_rows
from traceforensics.history.tables import (
    DEVICES,
    DOCUMENTS,
    FIGURES,
    FINDINGS,
    IDLE,
    INPUTS,
    LABELS,
)
from traceforensics.model.errors import InputError

ENCODING = "zlib+json"
#: Bytes read at a time when hashing a trace (traces can be GBs: never read whole).
HASH_BLOCK = 1 << 20

Row = dict[str, Any]


@dataclass
class RunRows:
    """The rows of one run, without ``run_id`` (the database gives it at insert) and
    ``recorded_at`` (set inside the writing transaction)."""

    run: Row
    inputs: list[Row] = field(default_factory=list)
    labels: list[Row] = field(default_factory=list)
    devices: list[Row] = field(default_factory=list)
    idle: list[Row] = field(default_factory=list)
    figures: list[Row] = field(default_factory=list)
    findings: list[Row] = field(default_factory=list)
    document: Row = field(default_factory=dict)


def check_document(document: Mapping[str, Any]) -> None:
    """An ``InputError`` unless ``document`` is an analysis document the store can read."""
    schema = document.get("schema") if isinstance(document, Mapping) else None
    if schema != SCHEMA_ANALYSIS:
        raise InputError(
            f"not a {SCHEMA_ANALYSIS} document (schema {schema!r}); store what "
            "tf analyze --json writes"
        )
    for key in ("devices", "findings", "step_summary", "inputs"):
        if not isinstance(document.get(key), list):
            raise InputError(f"{SCHEMA_ANALYSIS} document without a {key} list; store it whole")


def run_rows(
    document: Mapping[str, Any], labels: Mapping[str, str], inputs: Sequence[str]
) -> RunRows:
    """Every row of a new run from its document."""
    check_document(document)
    formats = {str(i.get("format")) for i in document["inputs"] if isinstance(i, Mapping)}
    fmt = formats.pop() if len(formats) == 1 else document.get("source_format")
    rows = RunRows(
        run={
            "tool_version": str(document.get("tool_version", "unknown"))[:64],
            "document_schema": SCHEMA_ANALYSIS,
            "source_format": document.get("source_format"),
            "trace_sha256": trace_digest(document),
        },
        inputs=[{"position": k, "path": p, "format": fmt} for k, p in enumerate(inputs)],
        labels=[{"key": k, "value": v} for k, v in labels.items()],
        document=encode_document(document),
    )
    add_analysis_rows(rows, document, "the analysis document")
    return rows


def add_analysis_rows(rows: RunRows, document: Mapping[str, Any], label: str) -> None:
    """The device, idle, figure and finding rows of ``document`` added to ``rows`` (``label``
    names the document in an error)."""
    rows.figures = figure_rows(document, label)
    steps = {(s["rank"], s["device"]): s for s in document["step_summary"]}
    mfu = document.get("mfu") or {}
    peaks = {(m["rank"], m["device"]): m for m in mfu.get("devices") or []}
    for d in document["devices"]:
        s = steps.get((d["rank"], d["device"]), {})
        m = peaks.get((d["rank"], d["device"]), {})
        rows.devices.append(
            {
                "rank": d["rank"],
                "device": d["device"],
                "name": str(d.get("name", ""))[:128],
                "window_kind": d.get("window_kind"),
                "window_ns": d["window_ns"],
                "busy_ns": d["busy_ns"],
                "idle_ns": d["idle_ns"],
                "top_cause": d.get("top_cause"),
                "comm_ns": d.get("comm_ns"),
                "exposed_comm_ns": d.get("exposed_comm_ns"),
                "exposed_copy_ns": d.get("exposed_copy_ns"),
                "mfu": d.get("mfu"),
                "flops": m.get("flops"),
                "peak_tflops": m.get("peak_tflops"),
                "mfu_window_ns": m.get("window_ns"),
                "step_count": s.get("n_steps"),
                "step_p50_ns": s.get("p50_ns"),
                "step_mean_ns": s.get("mean_ns"),
                "step_p95_ns": s.get("p95_ns"),
            }
        )
        for pos, (cause, ns) in enumerate(d.get("idle_by_cause", {}).items()):
            rows.idle.append(
                {
                    "rank": d["rank"],
                    "device": d["device"],
                    "cause": cause,
                    "position": pos,
                    "idle_ns": ns,
                }
            )
    for pos, f in enumerate(document["findings"]):
        rows.findings.append(
            {
                "position": pos,
                "category": f["category"],
                "rank": f["rank"],
                "device": f["device"],
                "recoverable_ns": f["recoverable_ns"],
                "share_of_window": f.get("share_of_window"),
                "confidence": f.get("confidence"),
                "minor": f.get("minor"),
                "title": f.get("title", ""),
            }
        )


def encode_document(document: Mapping[str, Any]) -> Row:
    """The document row: JSON bytes compressed with zlib. A text holding a lone surrogate (a
    file name that is not UTF-8) is kept as its ``\\udcXX`` escape."""
    try:
        raw = orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        raw = json.dumps(document, ensure_ascii=True).encode("ascii")
    return {"encoding": ENCODING, "raw_bytes": len(raw), "body": zlib.compress(raw, 6)}


def inflate(encoding: str, body: bytes) -> bytes:
    """The JSON bytes of a stored document row (``parse_document`` reads them)."""
    if encoding != ENCODING:
        raise InputError(
            f"stored document in unknown encoding {encoding!r}; upgrade traceforensics"
        )
    try:
        return zlib.decompress(body)
    except zlib.error as exc:
        raise _unreadable(exc) from exc


def parse_document(raw: bytes) -> dict[str, Any]:
    """The document of ``inflate``'s bytes."""
    try:
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:  # escaped lone surrogates: the stdlib reads them back
            doc = json.loads(raw)
    except ValueError as exc:
        raise _unreadable(exc) from exc
    if not isinstance(doc, dict):
        raise InputError("stored document is not a JSON object; the store is damaged")
    return doc


def _unreadable(exc: Exception) -> InputError:
    return InputError(f"stored document unreadable ({exc}); the store is damaged")


def trace_digest(document: Mapping[str, Any]) -> str | None:
    """sha256 (hex) of the trace bytes the analysis read: of the one file, or for several
    (a directory of rank files) of their sorted digests joined by newlines. None when a file
    can no longer be read (a document analysed elsewhere): the run is stored without it."""
    inputs = document.get("inputs") or []
    paths = [i["path"] for i in inputs if isinstance(i, Mapping) and isinstance(i.get("path"), str)]
    if not paths or len(paths) != len(inputs):
        return None
    try:
        digests = sorted(file_sha256(Path(p)) for p in paths)
    except OSError:
        return None
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 (hex) of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def insert_children(conn: sa.Connection, run_id: int, rows: RunRows) -> None:
    """Insert every row of a run but the run's own (which exists), document last."""
    for table, items in (
        (INPUTS, rows.inputs),
        (LABELS, rows.labels),
        (DEVICES, rows.devices),
        (IDLE, rows.idle),
        (FIGURES, rows.figures),
        (FINDINGS, rows.findings),
    ):
        if items:
            conn.execute(table.insert(), [{"run_id": run_id, **r} for r in items])
    conn.execute(DOCUMENTS.insert().values(run_id=run_id, **rows.document))
