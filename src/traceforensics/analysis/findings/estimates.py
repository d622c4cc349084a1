"""How much time each kind of change can give back: the constants and rules of the estimates.

- idle cause ``c``: removing the cause gives back at most its idle time on the device, so
  ``recoverable = idle_by_cause[c]``. Confidence (``Cause.confidence``, one per row of
  ``analysis.cause_table``): ``high`` where the host recorded the cause itself (a sync call, a
  copy, a data-loader range, I/O, allocator, compile, a collective), ``medium`` for causes read
  from timing (launch overhead, GPU pick-up, CPU work, cross-stream waits), ``low`` for
  ``untraced`` and ``profiler_overhead``.
- ``exposed_communication``: communication that no compute overlaps could at best be hidden
  behind compute: ``recoverable = exposed_comm_ns`` (``medium``: it needs compute to hide
  behind, and a straggler elsewhere can be the real cause).
- ``transfer_bound`` (steady-state copies only: copies starting in a one-off window, such as
  ``init_model`` or the lead-in, are one-off): two parts, each stated in the finding.
  *Bandwidth*: the copy time no compute overlaps, per direction (its share of the exposed copy
  time, split by each direction's copy time), times ``1 - ideal/actual``, where
  ``ideal = count * COPY_LATENCY_NS + bytes / attainable``: the time the same copies would take
  at the bandwidth the link reaches with pinned memory, each still paying a fixed start-up
  cost (so many tiny copies are not judged against the link's bandwidth)::

      exposed copy:  |==========================|      (achieved 4 GB/s)
      at 25 GB/s:    |====|                            (attainable)
      bandwidth:          |=====================|

  *Overlap*: what is left of the exposed copy time at full speed could run under compute (an
  asynchronous copy from pinned memory on its own stream, issued ahead of use), as far as there
  is compute to hide it: ``overlap = min(exposed - bandwidth, compute_free)``, where
  ``compute_free`` = the steady kernels and collectives not already overlapping a copy::

      compute:   |====|      |====|          copies at full speed, serialised with compute
      copies:         |======|    |======|
      overlap:        |====|      |====|     (bounded by the compute free to hide them)

  ``recoverable = bandwidth + overlap`` (never more than the exposed copy time).

  Attainable host<->device bandwidth is assumed from the compute capability (PCIe generation;
  the trace does not record the link): ``PCIE_GBPS``. Device-to-device copies and memsets
  against half the memory bandwidth (read + write). Unknown bandwidth: half the exposed time,
  ``low`` confidence.
- ``kernel_efficiency``: per op with a FLOP/byte model (roofline), compute-bound ops against
  ``ATTAINABLE_MFU`` of the dtype's peak, memory-bound ops against ``ATTAINABLE_MEMBW`` of the
  memory bandwidth: ``recoverable = kernel_ns * (1 - achieved / attainable)`` (0 when at or
  above it); ops with an impossible figure (MFU or bandwidth share above 1) are left out.
  An op Nsight Compute measured (``tf analyze --ncu``: ``OpRow.source == "ncu"``) is judged on
  the measured figures instead, estimates or suspect flags aside: its bottleneck unit's
  throughput ``sol = max(sm_pct, mem_pct or dram_pct) / 100`` against ``ATTAINABLE_SOL``,
  ``recoverable = kernel_ns * (1 - sol / ATTAINABLE_SOL)`` (0 at or above it); the finding's
  confidence is ``medium`` when its largest op is measured (``low`` otherwise).
"""

from __future__ import annotations

from typing import Final

from traceforensics.analysis.cause_table import CAUSE_TABLE

#: Confidence of each idle cause's estimate (``Cause.confidence``; the rule is above).
IDLE_CONFIDENCE: Final[dict[str, str]] = {c.id: c.confidence for c in CAUSE_TABLE}
#: Share of a dtype's dense peak a well-shaped GEMM/conv reaches in practice.
ATTAINABLE_MFU: Final = 0.75
#: Share of the memory bandwidth a streaming kernel reaches in practice.
ATTAINABLE_MEMBW: Final = 0.8
#: Share of peak (Nsight Compute's Speed Of Light %) of the busiest unit a tuned kernel
#: reaches: NVIDIA's guidance reads above 80% as close to the hardware's limit.
ATTAINABLE_SOL: Final = 0.8
#: Host<->device bandwidth (GB/s, pinned, one direction) by PCIe generation, practical figures.
PCIE_GBPS: Final[dict[int, float]] = {3: 12.0, 4: 25.0, 5: 50.0}
#: Without a known bandwidth, the share of the exposed copy time counted as recoverable.
UNKNOWN_BW_SHARE: Final = 0.5


def pcie_generation(compute_capability: str | None, vendor: str | None) -> int:
    """PCIe generation assumed for a GPU: Volta/Turing 3, Ampere/Ada 4, Hopper and later 5;
    AMD: 4 (MI100-MI250), MI300 (gfx94x, cc 9.4+) 5; unknown: 3 (the conservative guess)."""
    try:
        major, minor = (int(x) for x in (compute_capability or "").split(".")[:2])
    except ValueError:
        return 3
    if (vendor or "").lower().startswith("amd"):
        return 5 if (major, minor) >= (9, 4) else 4
    if major >= 9:
        return 5
    return 4 if major >= 8 else 3


def attainable_gbps(
    direction: str, pcie_gen: int, mem_bw_bytes_per_s: float | None
) -> float | None:
    """Bandwidth (GB/s) a direction's copies can reach; None when unknown (peer copies)."""
    if direction in ("h2d", "d2h", "h2h"):
        return PCIE_GBPS[pcie_gen]
    if direction in ("d2d", "memset") and mem_bw_bytes_per_s:
        return mem_bw_bytes_per_s / 2e9
    return None


#: Fixed cost of one copy or memset (DMA set-up / kernel start), ns.
COPY_LATENCY_NS: Final = 2_000


def shortfall(count: int, nbytes: int, time_ns: int, attainable: float | None) -> tuple[float, str]:
    """``(1 - ideal/actual, confidence)`` of ``count`` copies of ``nbytes`` taking ``time_ns``
    (0 when at or better than ideal); without bytes or an attainable bandwidth
    ``UNKNOWN_BW_SHARE`` at ``low`` confidence."""
    if not nbytes or not time_ns or attainable is None or attainable <= 0:
        return UNKNOWN_BW_SHARE, "low"
    ideal = count * COPY_LATENCY_NS + nbytes / attainable  # GB/s = bytes per ns
    return max(0.0, 1.0 - ideal / time_ns), "medium"


def transfer_recoverable(
    exposed_ns: int, bandwidth_ns: float, compute_free_ns: int
) -> tuple[int, int]:
    """``(bandwidth, overlap)`` ns of exposed copies (the module's ``transfer_bound`` rule):
    ``bandwidth_ns`` (the shortfall part) capped at ``exposed_ns``, and the rest of the exposed
    time that ``compute_free_ns`` of compute could hide."""
    bw = int(min(max(bandwidth_ns, 0.0), exposed_ns))
    return bw, int(min(exposed_ns - bw, max(compute_free_ns, 0)))
