"""The rows of the diff's tables, built once for the terminal, Markdown and HTML renderers.

Which tables the report holds, which figures each lists, in what order, and every cell's text
(values in one unit per row, signed changes, the noise mark) live here; the renderers only add
layout and markup.
Cell text is plain text straight from the documents (kernel names are not escaped here).

Noise marks: ``~`` the change is within step-to-step noise, ``?`` too few steps to tell,
empty when the change is beyond noise or the figure has no per-step values.
"""

from __future__ import annotations

from dataclasses import dataclass

from traceforensics.compare import Diff
from traceforensics.compare.changes import FindingChange, KernelChange
from traceforensics.compare.deltas import DeviceDiff, FigureDelta
from traceforensics.compare.diff import RunInfo
from traceforensics.compare.verdict import part_label
from traceforensics.compare.words import fmt_cells, fmt_delta, fmt_pct

NOISE_LEGEND = (
    "~ within step-to-step noise (median shift within 2 standard errors of the step medians); "
    "? too few steps (< 3) to tell"
)
#: Kernel changes shown per renderer (the JSON has all of them).
KERNEL_ROWS = 10
_BASIS_WORDS = {
    "per_step": "per step: the mean of the steps' values (idle outside the steps left out)",
    "total": "window totals: a side has no steps, so nothing is per step and the noise is unknown",
}


@dataclass(frozen=True)
class FigureRow:
    """One figure: label, before, after, change, change in % and the noise mark."""

    label: str
    before: str
    after: str
    delta: str
    delta_pct: str
    noise: str

    def cells(self) -> list[str]:
        return [self.label, self.before, self.after, self.delta, self.delta_pct, self.noise]


FIGURE_HEADER = ["", "before", "after", "change", "change %", "noise"]


def noise_mark(d: FigureDelta) -> str:
    if d.noise is None:
        return ""
    return {True: "~", False: "", None: "?"}[d.within_noise]


def figure_row(label: str, d: FigureDelta) -> FigureRow:
    before, after = fmt_cells(d.before, d.after, d.unit)
    pct = "new" if d.before == 0 and (d.after or 0) > 0 else fmt_pct(d.delta_pct)
    return FigureRow(label, before, after, fmt_delta(d).removesuffix("/step"), pct, noise_mark(d))


def moved_text(diff: Diff) -> str | None:
    """Every part that moved beyond noise, largest change first (``busy time +506.80 ms/step,
    launch_overhead idle +3.9 ms/step``), when more than the verdict's lead did; else None."""
    moved = diff.verdict.moved
    if len(moved) < 2:
        return None
    return "beyond noise: " + ", ".join(f"{part_label(d)} {fmt_delta(d)}" for d in moved)


def basis_text(dd: DeviceDiff) -> str:
    """How the job's time figures are counted, in words."""
    return _BASIS_WORDS.get(dd.basis, dd.basis)


def steps_text(run: RunInfo) -> str:
    """``6 steps``, ``1 step`` or ``no steps``: a run's steps in its header line."""
    return f"{run.steps} step{'s' if run.steps != 1 else ''}" if run.steps else "no steps"


def cause_rows(dd: DeviceDiff) -> list[FigureRow]:
    """All idle first, then every cause with time on either side, largest change first."""
    causes = [
        (name.removeprefix("idle."), d)
        for name, d in dd.figures.items()
        if name.startswith("idle.") and (d.before or d.after)
    ]
    causes.sort(key=lambda c: -abs(c[1].delta or 0.0))
    return [figure_row("idle (all causes)", dd.figures["idle"])] + [
        figure_row(c, d) for c, d in causes
    ]


def step_rows(dd: DeviceDiff) -> list[FigureRow]:
    """Median step, mean step and the interquartile range (the spread)."""
    labels = {"step_time": "median", "step_time.mean": "mean", "step_time.iqr": "spread (IQR)"}
    return [figure_row(label, dd.figures[name]) for name, label in labels.items()]


def busy_rows(dd: DeviceDiff) -> list[FigureRow]:
    """MFU, busy time (all and by kind), communication and exposed copies, where either side
    has any."""
    names = {"mfu": "MFU", "busy": "busy (all kinds)"}
    names |= {n: "busy: " + n.removeprefix("busy.") for n in dd.figures if n.startswith("busy.")}
    names |= {"comm": "communication kernels", "comm.exposed": "exposed communication"}
    names |= {"copy.exposed": "exposed copies"}
    return [
        figure_row(label, dd.figures[n])
        for n, label in names.items()
        if dd.figures[n].before or dd.figures[n].after
    ]


@dataclass(frozen=True)
class FigureTable:
    """One table of the job's figures: its title, what its rows count (``per step``, ``6 → 6
    steps``), the rows, and ``order``: how they are sorted when not in figure order."""

    title: str
    scope: str
    rows: list[FigureRow]
    order: str = ""


def figure_tables(dd: DeviceDiff) -> list[FigureTable]:
    """The figure tables in report order: idle by cause, step time (steps on both sides),
    MFU and busy time (when any)."""
    unit = per_step_unit(dd)
    tables = [FigureTable("Idle time by cause", unit, cause_rows(dd), "largest change first")]
    if dd.steps_before and dd.steps_after:
        steps = f"{dd.steps_before} → {dd.steps_after} steps"
        tables.append(FigureTable("Step time", steps, step_rows(dd)))
    busy = busy_rows(dd)
    if busy:
        tables.append(FigureTable("MFU and busy time", unit, busy))
    return tables


@dataclass(frozen=True)
class ChangeRow:
    """A finding or kernel change: where, what, before, after, change, and a note."""

    where: str
    what: str
    before: str
    after: str
    delta: str
    note: str

    def cells(self) -> list[str]:
        return [self.where, self.what, self.before, self.after, self.delta, self.note]


def one_device(diff: Diff) -> bool:
    """Both sides hold the same one device: the rank/GPU column would say nothing."""
    return len(diff.devices) == 1 and not diff.unmatched


def several_devices(diff: Diff) -> bool:
    """More than one device matched, or a device on one side only: the devices table."""
    return len(diff.devices) > 1 or bool(diff.unmatched)


def finding_rows(diff: Diff) -> list[ChangeRow]:
    """Every finding change, largest change of time to give back first."""
    return [_finding_row(f) for f in diff.findings]


def _change_row(rank: int, device: int, what: str, d: FigureDelta, note: str) -> ChangeRow:
    before, after = fmt_cells(d.before, d.after, d.unit)
    pct = "" if d.delta_pct is None else f", {fmt_pct(d.delta_pct)}"
    return ChangeRow(f"{rank}/{device}", what, before, after, fmt_delta(d) + pct, note)


def _finding_row(f: FindingChange) -> ChangeRow:
    notes = [f.change]
    notes += ["within step-to-step noise"] if f.within_noise else []
    notes += ["minor now"] if f.minor_after and f.change != "disappeared" else []
    return _change_row(f.rank, f.device, f.category, f.recoverable, ", ".join(notes))


def kernel_rows(diff: Diff) -> list[ChangeRow]:
    """The ``KERNEL_ROWS`` kernels whose total time changed most over all devices (one side
    unknown: not in its top list)."""
    rows = sorted(diff.kernels, key=lambda k: -k.magnitude)[:KERNEL_ROWS]
    return [_kernel_row(k) for k in rows]


def _kernel_row(k: KernelChange) -> ChangeRow:
    d = k.total
    if d.before is None:
        note = "entered the top list"
    elif d.after is None:
        note = "left the top list"
    else:
        note = f"calls {k.count_before} → {k.count_after}"
    return _change_row(k.rank, k.device, k.name, d, note)


def per_step_unit(dd: DeviceDiff) -> str:
    """``per step`` or ``window totals``: how the time rows of a table are counted."""
    return "per step" if dd.basis == "per_step" else "window totals"


def device_rows(diff: Diff) -> list[list[str]]:
    """One row per matched device: step time, idle and its largest change (multi-device)."""
    rows = []
    for dd in diff.devices:
        step, idle = dd.figures["step_time"], dd.figures["idle"]
        causes = [(n, d) for n, d in dd.figures.items() if n.startswith("idle.") and d.delta]
        top = max(causes, key=lambda c: abs(c[1].delta or 0.0), default=None)
        moved = f"{top[0]} {fmt_delta(top[1])}" if top else "-"
        rows.append(
            [f"{dd.rank}/{dd.device}", dd.name_after, fmt_pct(step.delta_pct) + noise_mark(step),
             fmt_pct(idle.delta_pct) + noise_mark(idle), moved]
        )  # fmt: skip
    return rows


DEVICE_HEADER = ["rank/GPU", "name", "step time", "idle", "largest cause change"]
#: Columns of the findings and kernels tables (the first left out with one device).
CHANGE_HEADER = ["rank/GPU", "what", "before", "after", "change", "note"]
