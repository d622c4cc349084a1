"""The options tree of an analysis: one group per concern, every default defined here once.

The CLI reads its defaults from ``DEFAULTS``; the notebook façade and the passes accept the same
flat names (``AnalysisOptions.of(window="trace", bin_ms=10)``). Groups:

- ``steps``: which ranges are steps and how a step's window is cut (read by the context);
- ``idle``: the analysis window, user data-loading words, how many gaps keep evidence;
- ``kernels``: short-kernel threshold, peak override, rows kept;
- ``utilization``: the timeline's bin size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final, Literal

import polars as pl

from traceforensics.analysis.names import DEFAULT_DATA_PATTERNS
from traceforensics.analysis.steps import STEP_MARKER_RE
from traceforensics.model.errors import InputError, OptionError

WindowKind = Literal["device", "trace"]
StepWindowKind = Literal["tiled", "annotation"]
#: Rows of the kernel tables kept in results (the JSON's ``short_kernels``/``ops``) at least.
MIN_KERNEL_ROWS: Final = 20


@dataclass(frozen=True)
class StepOptions:
    """``pattern``: regex (searched, case-sensitive unless it says ``(?i)``) naming step ranges;
    None = ``ProfilerStep#N``, else NVTX/user ranges named like steps or iterations.
    ``window``: ``tiled`` = a step runs from the previous step's last GPU work to its own last
    GPU work (idle before its first GPU work is charged to it); ``annotation`` = the step's own
    device-side span."""

    pattern: str | None = None
    window: StepWindowKind = "tiled"

    @property
    def marker_re(self) -> str:
        """Ranges that are step markers (never classified as a cause, never open a window)."""
        return STEP_MARKER_RE if not self.pattern else f"{STEP_MARKER_RE}|{self.pattern}"


@dataclass(frozen=True)
class IdleOptions:
    """``window``: ``device`` = first to last GPU work of the device; ``trace`` = first to last
    recorded interval of the rank (idle before the first and after the last GPU work counts).
    ``data_patterns``: words marking user data-loading ranges. ``top_gaps``: gaps kept with
    evidence."""

    window: WindowKind = "device"
    data_patterns: tuple[str, ...] = DEFAULT_DATA_PATTERNS
    top_gaps: int = 10


_RANGE_RE = re.compile(r"^\s*(\d*)\s*(:?)\s*(\d*)\s*$")


@dataclass(frozen=True)
class StepRange:
    """Inclusive step numbers; None = open end."""

    first: int | None
    last: int | None

    @classmethod
    def parse(cls, text: str) -> StepRange:
        """``"3:"``, ``":5"``, ``"2:5"`` or ``"4"``; ``OptionError`` otherwise."""
        m = _RANGE_RE.match(text)
        if not m or not (m.group(1) or m.group(3)):
            raise OptionError(
                f"steps {text!r}: not a step range; pass A:B, A: or :B (step numbers), or A",
                "steps",
            )
        a = int(m.group(1)) if m.group(1) else None
        b = int(m.group(3)) if m.group(3) else None
        if not m.group(2):
            b = a
        if a is not None and b is not None and b < a:
            raise OptionError(f"steps {text!r}: the range is empty; pass A:B with A <= B", "steps")
        return cls(a, b)


@dataclass(frozen=True)
class RangeOptions:
    """The part of the trace to analyse (``analysis.restrict``): ``steps`` = a step range
    (``"3:"``, ``":5"``, ``"2:5"``, ``"4"``); ``start_ns``/``end_ns`` = offsets (ns) from the
    trace's first event. None everywhere = the whole trace."""

    steps: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None


@dataclass(frozen=True)
class KernelOptions:
    """``short_kernel_us``: threshold (µs); ``peak_tflops``: peak override (TFLOPS, all
    dtypes); ``top``: rows shown per table (results keep at least ``MIN_KERNEL_ROWS``)."""

    short_kernel_us: float = 10.0
    peak_tflops: float | None = None
    top: int = 10

    @property
    def rows_kept(self) -> int:
        return max(self.top, MIN_KERNEL_ROWS)


@dataclass(frozen=True)
class UtilizationOptions:
    """``bin_ms``: bin of the busy-fraction timeline (ms; dashboards sample at 100 ms)."""

    bin_ms: float = 100.0


#: The workloads ``--workload`` takes.
WORKLOADS: Final = ("auto", "serving", "training")


@dataclass(frozen=True)
class ServingOptions:
    """``workload``: ``auto`` (the serving view when the trace shows a server's signs),
    ``serving`` (force it), ``training`` (never; docs/serving.md)."""

    workload: str = "auto"


#: Flat option name -> (group, field): the names of the CLI flags and of the façade's kwargs.
FLAT_NAMES: Final[dict[str, tuple[str, str]]] = {
    "step_pattern": ("steps", "pattern"),
    "step_window": ("steps", "window"),
    "window": ("idle", "window"),
    "data_patterns": ("idle", "data_patterns"),
    "top_gaps": ("idle", "top_gaps"),
    "short_kernel_us": ("kernels", "short_kernel_us"),
    "peak_tflops": ("kernels", "peak_tflops"),
    "top": ("kernels", "top"),
    "bin_ms": ("utilization", "bin_ms"),
    "steps": ("range", "steps"),
    "start_ns": ("range", "start_ns"),
    "end_ns": ("range", "end_ns"),
    "workload": ("serving", "workload"),
}


@dataclass(frozen=True)
class AnalysisOptions:
    """Every knob of an analysis, grouped by the pass that reads it."""

    steps: StepOptions = field(default_factory=StepOptions)
    idle: IdleOptions = field(default_factory=IdleOptions)
    kernels: KernelOptions = field(default_factory=KernelOptions)
    utilization: UtilizationOptions = field(default_factory=UtilizationOptions)
    range: RangeOptions = field(default_factory=RangeOptions)
    serving: ServingOptions = field(default_factory=ServingOptions)

    @classmethod
    def of(cls, **flat: Any) -> AnalysisOptions:
        """Options from flat names (``FLAT_NAMES``), e.g. ``AnalysisOptions.of(window="trace")``;
        values are checked (``check``)."""
        return DEFAULTS.with_(**flat)

    def with_(self, **flat: Any) -> AnalysisOptions:
        """A copy with the flat-named options replaced (None for a value means "default")."""
        unknown = sorted(set(flat) - set(FLAT_NAMES))
        if unknown:
            raise InputError(
                f"unknown analysis option(s) {', '.join(unknown)}; known: "
                f"{', '.join(sorted(FLAT_NAMES))}"
            )
        groups: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, value in flat.items():
            group, attr = FLAT_NAMES[name]
            if value is None and attr not in (
                "pattern",
                "peak_tflops",
                "steps",
                "start_ns",
                "end_ns",
            ):
                continue
            new = value
            if name == "data_patterns":  # one word or several; empty means "the defaults"
                words = (value,) if isinstance(value, str) else tuple(value)
                new = words or DEFAULT_DATA_PATTERNS
            groups[group] = replace(groups[group], **{attr: new})
        out = AnalysisOptions(**groups)
        out.check()
        return out

    def flat(self) -> dict[str, Any]:
        """The options as flat names (the inverse of ``of``)."""
        return {name: getattr(getattr(self, g), a) for name, (g, a) in FLAT_NAMES.items()}

    def check(self) -> None:
        """Raise ``InputError`` (one line, no CLI flag names) for an out-of-range value."""
        k, u, i, st = self.kernels, self.utilization, self.idle, self.steps
        _positive("short_kernel_us", k.short_kernel_us)
        _positive("bin_ms", u.bin_ms)
        if k.peak_tflops is not None:
            _positive("peak_tflops", k.peak_tflops)
        for name, v in (("top", k.top), ("top_gaps", i.top_gaps)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise OptionError(f"{name} {v!r}: must be an integer >= 0; pass 0 or more", name)
        if i.window not in ("device", "trace"):
            raise OptionError(
                f"window {i.window!r}: not a window; pass 'device' or 'trace'", "window"
            )
        if st.window not in ("tiled", "annotation"):
            raise OptionError(
                f"step_window {st.window!r}: not a step window; pass 'tiled' or 'annotation'",
                "step_window",
            )
        if st.pattern is not None:
            check_regex("step_pattern", st.pattern)
        for word in i.data_patterns:
            if not isinstance(word, str):
                raise OptionError(
                    f"data_patterns {word!r}: not a word; pass strings", "data_patterns"
                )
        if self.serving.workload not in WORKLOADS:
            raise OptionError(
                f"workload {self.serving.workload!r}: not a workload; pass "
                + ", ".join(repr(w) for w in WORKLOADS),
                "workload",
            )
        self._check_range()

    def _check_range(self) -> None:
        r = self.range
        if r.steps is not None:
            StepRange.parse(r.steps)
        for name in ("start_ns", "end_ns"):
            v = getattr(r, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise OptionError(f"{name} {v!r}: not a time >= 0; pass one", name)
        if r.start_ns is not None and r.end_ns is not None and r.end_ns <= r.start_ns:
            raise OptionError(
                f"end_ns {r.end_ns}: not after start_ns {r.start_ns}; pass a later end", "end_ns"
            )


def regex_error(pattern: str) -> str | None:
    """Why ``pattern`` is not a usable regex (one line), or None. It must compile in Python and
    in polars, which runs it (a Rust engine: no look-around or back-references)."""
    try:
        re.compile(pattern)
        pl.Series([""]).str.contains(pattern)
    except (re.error, pl.exceptions.PolarsError) as exc:
        return " ".join(str(exc).split())[:160]
    return None


def check_regex(name: str, pattern: str) -> None:
    """Raise ``OptionError`` naming option ``name`` when ``regex_error(pattern)``."""
    detail = regex_error(pattern)
    if detail is not None:
        raise OptionError(
            f"{name} {pattern!r}: invalid regular expression ({detail}); fix the pattern", name
        )


def _positive(name: str, v: float) -> None:
    if not isinstance(v, (int, float)) or not v > 0 or v == float("inf"):
        raise OptionError(f"{name} {v!r}: not a finite number > 0; pass one", name)


#: The defaults, defined once (the CLI shows these).
DEFAULTS: Final = AnalysisOptions()
