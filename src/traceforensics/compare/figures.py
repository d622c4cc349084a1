"""The comparable figures of one analysis document (``traceforensics.analysis/1``).

A document is read once into one ``Side`` per (rank, device) and one for the job: window
totals (ns) of every time figure, the per-step values of the figures ``steps[]`` carries, and
the FLOPs and FLOP capacity behind MFU. Nothing here compares; ``deltas`` does.

Figure names are the ``--fail-on`` names (docs/diff.md):

- ``step_time`` (median step, ns), ``step_time.mean``, ``step_time.iqr`` (the spread)
- ``idle`` and ``idle.<cause>`` (every cause id of docs/causes.md)
- ``busy`` and ``busy.<kind>`` (``kernel``, ``communication``, ``memcpy``, ``memset``)
- ``comm`` (communication-kernel time), ``comm.exposed`` (the part no compute overlaps)
- ``copy.exposed`` (copy and memset time no compute overlaps)
- ``mfu`` (model FLOPs utilization, a fraction)

The job: time figures summed over its devices; its step ``k`` lasts as long as the slowest
device's step ``k`` (steps aligned by position, up to the fewest any device has); its MFU is
all FLOPs over all FLOP capacity (peak x span, summed), not a mean of the devices' MFUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from traceforensics.model.errors import InputError
from traceforensics.model.schema import BUSY_CLASSES

SCHEMA_ANALYSIS = "traceforensics.analysis/1"
#: Step-time figures: read from the step durations, never summed.
STEP_FIGURES: tuple[str, ...] = ("step_time", "step_time.mean", "step_time.iqr")
#: Time figures whose per-step values ``steps[]`` carries (the rest have window totals only).
_STEP_FIELDS = {"idle": "idle_ns", "busy": "busy_ns", "comm": "comm_ns"}
_STEP_FIELDS["comm.exposed"] = "exposed_comm_ns"
#: Floating point FLOP capacity per (TFLOPS x ns): 1e12 FLOP/s x 1e-9 s.
_FLOP_PER_TFLOPS_NS = 1e3


def figure_names(causes: Sequence[str], kinds: Sequence[str] = BUSY_CLASSES) -> tuple[str, ...]:
    """Every figure name, in report order, for these cause ids and busy kinds."""
    return (
        *STEP_FIGURES,
        "idle",
        *(f"idle.{c}" for c in causes),
        "busy",
        *(f"busy.{k}" for k in kinds),
        "comm",
        "comm.exposed",
        "copy.exposed",
        "mfu",
    )


def is_time_figure(name: str) -> bool:
    """A figure in ns that has a share of the window (every figure but step time and MFU)."""
    return name != "mfu" and name not in STEP_FIGURES


@dataclass(frozen=True)
class Side:
    """One device (``rank``/``device`` set) or the job (both None) of one document.

    ``totals``: window totals, ns, of every time figure. ``series``: per-step values in step
    order (ns; ``mfu`` a fraction), empty without steps. ``mfu_total``/``mfu_steps``: (FLOPs,
    FLOP capacity) over the GPU-active span and per step; capacity 0 when the peak is unknown.
    """

    rank: int | None
    device: int | None
    name: str
    window_ns: int
    totals: dict[str, float]
    series: dict[str, list[float]] = field(default_factory=dict)
    mfu_total: tuple[float, float] | None = None
    mfu_steps: tuple[tuple[float, float] | None, ...] = ()
    cause_ids: tuple[str, ...] = ()

    @property
    def n_steps(self) -> int:
        return len(self.series.get("step_time", ()))

    @property
    def mfu(self) -> float | None:
        return _ratio(self.mfu_total)

    @property
    def key(self) -> tuple[int, int] | None:
        return None if self.rank is None or self.device is None else (self.rank, self.device)


def _ratio(part: tuple[float, float] | None) -> float | None:
    return part[0] / part[1] if part is not None and part[1] > 0 else None


def check_document(doc: Any, label: str) -> dict[str, Any]:
    """``doc`` if it is an analysis document, else an ``InputError`` naming ``label``."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_ANALYSIS:
        got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise InputError(
            f"{label}: not a {SCHEMA_ANALYSIS} document (schema {got!r}); give a trace or the "
            "output of tf analyze --json"
        )
    if not isinstance(doc.get("devices"), list) or not isinstance(doc.get("steps", []), list):
        raise InputError(f"{label}: analysis document without a devices list; re-create it")
    return doc


def device_sides(doc: Mapping[str, Any]) -> list[Side]:
    """One ``Side`` per entry of ``devices[]``, in document order."""
    steps = _by_device(doc.get("steps") or [], "start_ns")
    mfu_dev = {(r["rank"], r["device"]): r for r in (doc.get("mfu") or {}).get("devices") or []}
    mfu_steps = _by_device((doc.get("mfu") or {}).get("steps") or [], "window_start_ns")
    return [
        _device_side(d, steps.get(_key(d), []), mfu_dev.get(_key(d)), mfu_steps.get(_key(d), []))
        for d in doc["devices"]
    ]


def _key(row: Mapping[str, Any]) -> tuple[int, int]:
    return int(row.get("rank") or 0), int(row.get("device") or 0)


def _by_device(rows: Iterable[Mapping[str, Any]], start: str) -> dict[tuple[int, int], list[Any]]:
    out: dict[tuple[int, int], list[Any]] = {}
    for r in rows:
        out.setdefault(_key(r), []).append(r)
    for v in out.values():
        v.sort(key=lambda r: r.get(start) or 0)
    return out


def _device_side(
    d: Mapping[str, Any],
    steps: list[Mapping[str, Any]],
    mfu_row: Mapping[str, Any] | None,
    mfu_rows: list[Mapping[str, Any]],
) -> Side:
    by_cause = d.get("idle_by_cause") or {}
    causes = tuple(by_cause)
    kinds = d.get("busy_by_kind") or {}
    totals: dict[str, float] = {
        "idle": d.get("idle_ns") or 0,
        "busy": d.get("busy_ns") or 0,
        "comm": d.get("comm_ns") or 0,
        "comm.exposed": d.get("exposed_comm_ns") or 0,
        "copy.exposed": d.get("exposed_copy_ns") or 0,
    }
    totals.update({f"idle.{c}": ns or 0 for c, ns in by_cause.items()})
    totals.update({f"busy.{k}": kinds.get(k) or 0 for k in BUSY_CLASSES})
    series: dict[str, list[float]] = {}
    if steps:
        series["step_time"] = [s.get("dur_ns") or 0 for s in steps]
        for name, col in _STEP_FIELDS.items():
            series[name] = [s.get(col) or 0 for s in steps]
        for c in causes:
            series[f"idle.{c}"] = [(s.get("idle_by_cause") or {}).get(c) or 0 for s in steps]
    by_start = {r.get("window_start_ns"): _mfu_part(r) for r in mfu_rows}
    per_step = tuple(by_start.get(s.get("start_ns")) for s in steps)
    series["mfu"] = [v for v in (_ratio(p) for p in per_step) if v is not None]
    return Side(
        rank=_key(d)[0],
        device=_key(d)[1],
        name=str(d.get("name") or "unknown"),
        window_ns=int(d.get("window_ns") or 0),
        totals={k: float(v) for k, v in totals.items()},
        series={k: [float(x) for x in v] for k, v in series.items() if v},
        mfu_total=_mfu_part(mfu_row) if mfu_row is not None else None,
        mfu_steps=per_step,
        cause_ids=causes,
    )


def _mfu_part(row: Mapping[str, Any]) -> tuple[float, float] | None:
    """(FLOPs, FLOP capacity) of one ``mfu`` row; None without FLOPs."""
    flops = row.get("flops")
    if flops is None:
        return None
    peak = row.get("peak_tflops") or 0.0
    return float(flops), float(peak) * float(row.get("window_ns") or 0) * _FLOP_PER_TFLOPS_NS


def job_side(devices: Sequence[Side]) -> Side:
    """The job: every device's time figures summed, steps aligned by position (module doc)."""
    n = min((d.n_steps for d in devices), default=0)
    totals: dict[str, float] = {}
    for d in devices:
        for k, v in d.totals.items():
            totals[k] = totals.get(k, 0.0) + v
    series: dict[str, list[float]] = {}
    if n:
        names = {k for d in devices for k in d.series if k not in ("step_time", "mfu")}
        for name in sorted(names):
            series[name] = [
                sum(d.series.get(name, [0.0] * n)[k] for d in devices) for k in range(n)
            ]
        series["step_time"] = [max(d.series["step_time"][k] for d in devices) for k in range(n)]
        steps = [_sum_parts(d.mfu_steps[k] for d in devices) for k in range(n)]
        series["mfu"] = [v for v in (_ratio(p) for p in steps) if v is not None]
    series = {k: v for k, v in series.items() if v}
    causes = tuple(dict.fromkeys(c for d in devices for c in d.cause_ids))
    return Side(
        rank=None,
        device=None,
        name="job",
        window_ns=sum(d.window_ns for d in devices),
        totals=totals,
        series=series,
        mfu_total=_sum_parts(d.mfu_total for d in devices),
        cause_ids=causes,
    )


def _sum_parts(
    parts: Iterable[tuple[float, float] | None],
) -> tuple[float, float] | None:
    """FLOPs and capacity summed over the parts that have both (a device whose peak is unknown
    adds nothing, so it cannot pull the job's MFU down)."""
    known = [p for p in parts if p is not None and p[1] > 0]
    if not known:
        return None
    return sum(p[0] for p in known), sum(p[1] for p in known)
