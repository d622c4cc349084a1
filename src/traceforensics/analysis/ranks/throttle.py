"""The straggler's GPU in a monitoring log: throttling as evidence of why it is late.

A rank whose compute kernels take longer than the others' (``slow_gpu``) is either a slower
part or a throttled one; a monitoring log aligned with the trace (``--monitor``, its GPU index
as on the straggler's host) tells which. Throttle episodes (``analysis.monitoring.throttle``:
SM clock well below its reference while busy) of the straggler's GPU inside the aligned log
become one evidence sentence; a log that shows none while the cause is ``slow_gpu`` says the
GPU ran at full clocks. Only evidence changes: the straggler and its cause stay as measured.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from traceforensics.analysis.ranks.results import SLOW_GPU, RankAnalysis

if TYPE_CHECKING:
    from traceforensics.analysis.monitoring.monitor import MonitorReport


def with_monitor(ranks: RankAnalysis, monitor: MonitorReport | None) -> RankAnalysis:
    """``ranks`` with the monitoring log's word on the straggler's GPU (module docstring)."""
    lead = ranks.straggler
    if lead is None or monitor is None:
        return ranks
    gpu = next((g for g in monitor.gpus if g.gpu == lead.device), None)
    if gpu is None:
        return ranks
    episodes = gpu.throttle_episodes
    if episodes:
        seconds = sum(e.end - e.start for e in episodes)
        reasons = ", ".join(sorted({e.reason for e in episodes}))
        low = min(e.sm_clock_mhz for e in episodes)
        ref = episodes[0].sm_clock_ref_mhz
        text = (
            f"monitoring log: GPU {lead.device} throttled ({reasons}) for {seconds:.1f} s of "
            f"{gpu.span_s:.1f} s, SM clock down to {low:.0f} MHz of {ref:.0f}"
        )
    elif lead.cause == SLOW_GPU:
        text = (
            f"monitoring log: GPU {lead.device} was not throttled: its kernels are slower at "
            "full clocks (a slower part, or other work on the same GPU)"
        )
    else:
        return ranks
    return replace(ranks, straggler=replace(lead, evidence=[*lead.evidence, text]))
