"""The tables of a history store, schema version 1 (docs/history.md, "Schema").

Every table name starts with ``tf_`` so a store can share a PostgreSQL database with other
applications. A run is one row of ``tf_runs``; every other table hangs off it by ``run_id``
(deleted with it). Times are integer ns (``*_ns``), shares floats in [0, 1], ``recorded_at``
is UTC. The per-device tables hold the document's figures unchanged (the evidence); the job's
figures are ``tf_figures``, computed by ``compare`` (``history.figures``), never here.
"""

from __future__ import annotations

import sqlalchemy as sa

METADATA = sa.MetaData()

#: One row per schema version applied to the store (the highest is the store's version).
SCHEMA = sa.Table(
    "tf_schema",
    METADATA,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("tool_version", sa.String(64), nullable=False),
)

#: One row per stored run. Ids come from the database (a sequence on PostgreSQL, AUTOINCREMENT
#: on SQLite): never reused, so a run id quoted in a CI log keeps naming the same run.
RUNS = sa.Table(
    "tf_runs",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("tool_version", sa.String(64), nullable=False),
    sa.Column("document_schema", sa.String(64)),
    sa.Column("source_format", sa.String(32)),
    # sha256 (hex) of the trace bytes; several rank files: of their sorted digests
    sa.Column("trace_sha256", sa.String(64), index=True),
    sqlite_autoincrement=True,
)


def _run_id() -> sa.Column[int]:
    return sa.Column(
        "run_id", sa.Integer, sa.ForeignKey("tf_runs.id", ondelete="CASCADE"), nullable=False
    )


#: The inputs as the user gave them (a trace, a directory of rank files, a monitoring log).
INPUTS = sa.Table(
    "tf_inputs",
    METADATA,
    _run_id(),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("format", sa.String(32)),
    sa.PrimaryKeyConstraint("run_id", "position"),
)

#: ``key=value`` labels, many per run, one per key.
LABELS = sa.Table(
    "tf_labels",
    METADATA,
    _run_id(),
    sa.Column("key", sa.String(64), nullable=False),
    sa.Column("value", sa.String(256), nullable=False),
    sa.PrimaryKeyConstraint("run_id", "key"),
    sa.Index("ix_tf_labels_key_value", "key", "value"),
)

#: One row per (rank, GPU) of the run: the figures of ``devices[]`` and ``step_summary[]``.
DEVICES = sa.Table(
    "tf_devices",
    METADATA,
    _run_id(),
    sa.Column("rank", sa.Integer, nullable=False),
    sa.Column("device", sa.Integer, nullable=False),
    sa.Column("name", sa.String(128)),
    sa.Column("window_kind", sa.String(16)),
    sa.Column("window_ns", sa.BigInteger, nullable=False),
    sa.Column("busy_ns", sa.BigInteger, nullable=False),
    sa.Column("idle_ns", sa.BigInteger, nullable=False),
    sa.Column("top_cause", sa.String(32)),
    sa.Column("comm_ns", sa.BigInteger),
    sa.Column("exposed_comm_ns", sa.BigInteger),
    sa.Column("exposed_copy_ns", sa.BigInteger),
    sa.Column("mfu", sa.Float),
    # behind the MFU (``mfu.devices[]``): FLOPs, the peak (TFLOPS) and the GPU-active span
    sa.Column("flops", sa.Float),
    sa.Column("peak_tflops", sa.Float),
    sa.Column("mfu_window_ns", sa.BigInteger),
    sa.Column("step_count", sa.Integer),
    sa.Column("step_p50_ns", sa.BigInteger),
    sa.Column("step_mean_ns", sa.BigInteger),
    sa.Column("step_p95_ns", sa.BigInteger),
    sa.PrimaryKeyConstraint("run_id", "rank", "device"),
)

#: Idle ns per cause id per device (every cause of the document, zeros included; a cause added
#: to the tool later needs no schema change). ``position`` keeps the cause-id order for ties.
IDLE = sa.Table(
    "tf_idle",
    METADATA,
    _run_id(),
    sa.Column("rank", sa.Integer, nullable=False),
    sa.Column("device", sa.Integer, nullable=False),
    sa.Column("cause", sa.String(32), nullable=False),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("idle_ns", sa.BigInteger, nullable=False),
    sa.PrimaryKeyConstraint("run_id", "rank", "device", "cause"),
)

#: The job's figures as ``traceforensics.compare.analysis_figures`` computes them when the run
#: is recorded (``history.figures``): one row per ``--fail-on`` name. ``unit``: ``ns``,
#: ``ns/step`` or ``fraction``; ``value`` in that unit (null when unknown); ``share``: a time
#: figure's window total over the window (null for step time and MFU).
FIGURES = sa.Table(
    "tf_figures",
    METADATA,
    _run_id(),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("unit", sa.String(16), nullable=False),
    sa.Column("basis", sa.String(24), nullable=False),
    sa.Column("value", sa.Float),
    sa.Column("share", sa.Float),
    sa.PrimaryKeyConstraint("run_id", "name"),
    sa.Index("ix_tf_figures_name", "name"),
)

#: The findings, in the document's order (largest ``recoverable_ns`` first).
FINDINGS = sa.Table(
    "tf_findings",
    METADATA,
    _run_id(),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("category", sa.String(32), nullable=False),
    sa.Column("rank", sa.Integer, nullable=False),
    sa.Column("device", sa.Integer, nullable=False),
    sa.Column("recoverable_ns", sa.BigInteger, nullable=False),
    sa.Column("share_of_window", sa.Float),
    sa.Column("confidence", sa.String(16)),
    sa.Column("minor", sa.Boolean),
    sa.Column("title", sa.Text, nullable=False),
    sa.PrimaryKeyConstraint("run_id", "position"),
)

#: The whole ``traceforensics.analysis/1`` document, compressed (``encoding``: ``zlib+json``),
#: so a stored run can be compared exactly like a fresh analysis.
DOCUMENTS = sa.Table(
    "tf_documents",
    METADATA,
    _run_id(),
    sa.Column("encoding", sa.String(16), nullable=False),
    sa.Column("raw_bytes", sa.BigInteger, nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
    sa.PrimaryKeyConstraint("run_id"),
)
