"""What a trace is and what it cannot show: ``diagnostics[]``, one ``{code, message}`` each.

Every warning of an analysis (``Analysis.warnings``, strings: a contract) is also a
diagnostic with the same text and a code; a diagnostic that is not a problem (``cpu_only``)
is not a warning. Ingest facts get their code where they are born (``TraceMeta.diagnostics``:
an nsys export's missing CUDA tables, its lost data); analysis facts here. A warning nobody
coded keeps the generic code ``warning``. The codes (a contract: add, never rename; each
explained by ``tf explain CODE`` and docs/json-output.md):

=====================  ==========  ==========================================================
code                   born in     when
=====================  ==========  ==========================================================
gpu_activity_missing   analysis    a rank recorded launch calls and no GPU activity record
cuda_tables_missing    nsys        the export has no CUDA table (CUDA tracing was off)
cpu_only               analysis    a rank has no GPU activity and no launch call (not a warning)
analysis_failed        analysis    a pass raised on this trace; its part of the report is empty
monitor_unaligned      analysis    the monitoring log could not be put on the trace's clock
nsys_data_lost         nsys        nsys recorded lost or dropped events
rows_dropped           nsys        rows without a start time or device were dropped
schema_newer           nsys        the export schema is newer than the tested ones
names_missing          nsys        no StringIds table: names unknown
nvtx_ranges_open       nsys        NVTX ranges that never ended were dropped
trace_truncated        kineto      the file was cut off mid-write; the events before the cut
warning                any         any other warning
=====================  ==========  ==========================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import polars as pl

from traceforensics.analysis.names import matching
from traceforensics.model.session import TraceMeta

GPU_ACTIVITY_MISSING: Final = "gpu_activity_missing"
CPU_ONLY: Final = "cpu_only"
ANALYSIS_FAILED: Final = "analysis_failed"
MONITOR_UNALIGNED: Final = "monitor_unaligned"
CUDA_TABLES_MISSING: Final = "cuda_tables_missing"
WARNING: Final = "warning"
#: Every code, in the order of the table above (the ingest codes are spelled where they are
#: born, ``ingest.nsys.loader``; a test checks that both lists agree).
CODES: Final[tuple[str, ...]] = (
    GPU_ACTIVITY_MISSING,
    CUDA_TABLES_MISSING,
    CPU_ONLY,
    ANALYSIS_FAILED,
    MONITOR_UNALIGNED,
    "nsys_data_lost",
    "rows_dropped",
    "schema_newer",
    "names_missing",
    "nvtx_ranges_open",
    "trace_truncated",
    WARNING,
)

#: Host API calls that put work on a GPU: kernel, cooperative and graph launches of CUDA, the
#: driver API and HIP (``cudaLaunchKernel``, ``cuLaunchKernelEx``, ``hipModuleLaunchKernel``,
#: ``cudaGraphLaunch``, with nsys's ``_v7000``/``_ptsz`` suffixes).
LAUNCH_API_RE: Final = r"^(?:cuda|cu|hip)[A-Za-z]*Launch[A-Za-z]*(?:_v\d+|_ptsz|_ptds)*$"


@dataclass(frozen=True)
class Diagnostic:
    """One fact about the trace: ``code`` (one of ``CODES``) and its one-line ``message``."""

    code: str
    message: str
    #: the number the message quotes (launch calls of ``gpu_activity_missing``), for the
    #: verdict; not in the JSON
    count: int | None = None

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


def launch_counts(events: pl.DataFrame) -> dict[int, int]:
    """Launch calls (``LAUNCH_API_RE``) per rank among the ``cuda_api`` rows of ``events``."""
    api = events.filter(pl.col("kind") == "cuda_api").select("rank", "name")
    if api.height == 0:
        return {}
    hits = api.filter(matching(api, LAUNCH_API_RE)).group_by("rank").len()
    return {int(r): int(n) for r, n in hits.iter_rows()}


def gpu_presence(
    launches: Mapping[int, int], ranks: Iterable[int], gpu_ranks: set[int], meta: TraceMeta
) -> list[Diagnostic]:
    """What each rank of ``ranks`` without GPU activity (not in ``gpu_ranks``) is:
    ``gpu_activity_missing`` when it recorded launch calls (``launches``: per rank), else
    ``cpu_only``. Nothing when the ingest already said why there is no GPU activity
    (``cuda_tables_missing``: no launch could have been recorded either). Texts of a trace
    with several ranks start with ``rank N: ``."""
    if any(d.get("code") == CUDA_TABLES_MISSING for d in meta.diagnostics):
        return []
    ranks = sorted(set(ranks))
    out: list[Diagnostic] = []
    for rank in ranks:
        if rank in gpu_ranks:
            continue
        head = f"rank {rank}: " if len(ranks) > 1 else ""
        n = launches.get(rank, 0)
        if n == 0:
            out.append(Diagnostic(CPU_ONLY, head + _CPU_ONLY_TEXT))
            continue
        src = next((i.path for i in meta.inputs if i.rank == rank), "the trace")
        out.append(Diagnostic(GPU_ACTIVITY_MISSING, head + _missing_text(src, n, meta), n))
    return out


_CPU_ONLY_TEXT: Final = (
    "no GPU activity and no GPU launch call in this trace: a CPU-only capture; the host time "
    "of its steps is in the host section"
)


def _missing_text(src: str, launches: int, meta: TraceMeta) -> str:
    record = (
        "record again with `nsys profile -t cuda` (the kernel and copy records are part of "
        "CUDA tracing) and check nsys's messages about lost CUPTI buffers"
        if meta.source_format == "nsys"
        else "record with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] and let the "
        "profiler stop cleanly (its device buffer is written at the end)"
    )
    return (
        f"{src}: {launches:,} GPU launch calls were recorded but the GPU activity records are "
        "missing (the profiler's device buffer was lost, or CUDA activity was not enabled), "
        f"so GPU idle time cannot be attributed; {record} (tf explain {GPU_ACTIVITY_MISSING})"
    )


def meta_codes(meta: TraceMeta | None) -> dict[str, str]:
    """message -> code of the ingest's coded warnings (``meta.diagnostics``)."""
    if meta is None:
        return {}
    return {d["message"]: d["code"] for d in meta.diagnostics if "message" in d and "code" in d}


def coded(
    warnings: list[str], codes: Mapping[str, str], made: Sequence[Diagnostic] = ()
) -> list[Diagnostic]:
    """Every warning as a diagnostic, in order: the one of ``made`` with its text (the
    analysis's own), else its code from ``codes`` (message -> code: ``meta_codes``), else
    ``warning``; then the diagnostics of ``made`` that are not warnings (``cpu_only``)."""
    said = set(warnings)
    mine = {d.message: d for d in made}
    return [mine.get(w) or Diagnostic(codes.get(w, WARNING), w) for w in warnings] + [
        d for d in made if d.message not in said
    ]


def failure_text(pass_name: str, exc: BaseException) -> str:
    """The ``analysis_failed`` warning of a pass that raised: which pass, what, and that the
    rest of the report stands."""
    what = " ".join(str(exc).split())[:200] or "no message"
    return (
        f"the {pass_name} analysis failed on this trace ({type(exc).__name__}: {what}); its "
        "part of the report is empty and the rest stands; please report it with the trace "
        f"(tf explain {ANALYSIS_FAILED})"
    )
