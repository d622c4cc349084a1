"""What the investigation (``analysis.method``) reads of a finished analysis: read-only
protocols over ``pipeline.Analysis`` (``pipeline`` imports ``method``, so ``method`` cannot
import it; mypy checks the real ``Analysis`` against ``AnalysisView``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.program import Program


# ------------------------------------------------------- what the walk reads (read-only views)
# (plain attributes where the result is a mutable dataclass with the same type; properties
# where it is frozen, or holds containers of its own types: read-only members are covariant)
class _Phase(Protocol):
    @property
    def gpu_ns(self) -> int: ...


class StepView(Protocol):
    rank: int
    device: int
    name: str
    start_ns: int
    dur_ns: int
    busy_ns: int

    @property
    def phases(self) -> Mapping[str, _Phase]: ...


class _Outlier(Protocol):
    name: str
    excess_ns: int
    reason: str


class _Summary(Protocol):
    rank: int
    device: int
    source: str
    p50_ns: float
    p95_ns: float
    cv: float

    @property
    def outliers(self) -> Sequence[_Outlier]: ...


class _Idle(Protocol):
    @property
    def steps(self) -> Sequence[StepView]: ...
    @property
    def step_summary(self) -> Sequence[_Summary]: ...


class _Mfu(Protocol):
    rank: int
    device: int
    mfu: float | None
    tflops: float | None
    peak_tflops: float | None
    suspect: bool


class _Kernels(Protocol):
    @property
    def mfu_by_device(self) -> Sequence[_Mfu]: ...


class _Finding(Protocol):
    @property
    def category(self) -> str: ...
    @property
    def rank(self) -> int: ...
    @property
    def device(self) -> int: ...
    @property
    def title(self) -> str: ...
    @property
    def recoverable_ns(self) -> int: ...


class _StepOptions(Protocol):
    @property
    def window(self) -> str: ...


class _Options(Protocol):
    @property
    def steps(self) -> _StepOptions: ...


class _RankRow(Protocol):
    @property
    def rank(self) -> int: ...
    @property
    def device(self) -> int: ...
    @property
    def comm_wait_ns(self) -> int: ...


class _Straggler(Protocol):
    @property
    def rank(self) -> int: ...
    @property
    def cause(self) -> str: ...
    @property
    def waited_for_ns(self) -> int: ...
    @property
    def others_wait_ns(self) -> int: ...


class _Ranks(Protocol):
    matched_collectives: int

    @property
    def per_rank(self) -> Sequence[_RankRow]: ...
    @property
    def straggler(self) -> _Straggler | None: ...


class WorkSize(Protocol):
    """What the walk reads of ``analysis.work_size`` (``analysis.work_size.DeviceWork``)."""

    @property
    def rank(self) -> int: ...
    @property
    def device(self) -> int: ...
    @property
    def verdict(self) -> str: ...
    def sentence(self) -> str: ...


class AnalysisView(Protocol):
    """The parts of ``pipeline.Analysis`` the walk reads."""

    @property
    def devices(self) -> Sequence[DeviceRecord]: ...
    @property
    def idle(self) -> _Idle: ...
    @property
    def kernels(self) -> _Kernels: ...
    @property
    def findings(self) -> Sequence[_Finding]: ...
    @property
    def ranks(self) -> _Ranks | None: ...
    @property
    def program(self) -> Program: ...
    @property
    def work_size(self) -> Sequence[WorkSize]: ...
    @property
    def options(self) -> _Options: ...
