"""Suspect throughput figures: flagged, never hidden or clamped.

A row that carries an MFU/TFLOPS figure (``OpRow``, ``FamilyRow``, ``MfuRow``) is *suspect*
when its figure cannot be taken at face value. The rule, first matching reason wins:

1. ``mfu > 1.0`` - no chip beats its datasheet peak, so the FLOP model overstates the work or
   the peak is the wrong one: ``"above 100% of peak: <why, for the row's family>"``;
2. ``membw_share > 1.0`` - the byte model counts every operand once from DRAM, cached or
   reused ones included: ``"above the memory bandwidth: ..."``;
3. the peak was chosen without the trace naming the device (``DevicePeak.how`` is
   ``sm_count+cc`` or ``same_node``, see ``peaks``/``forensics.device_peaks``) and the row
   has a share of it (MFU or bandwidth share): ``"peak assumed for an unnamed device (<how>)"``.

A figure that is merely low is not suspect; ``name`` and ``override`` peaks are not guesses
(``unknown`` ones give no share to judge). The figures themselves are left as computed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from traceforensics.analysis.kernels.results import FamilyRow, MfuRow, OpRow
from traceforensics.analysis.peaks import DevicePeak

#: ``DevicePeak.how`` values that are guesses about a device the trace does not name.
ASSUMED_HOWS: Final = frozenset({"sm_count+cc", "same_node"})

#: Why a family's MFU can exceed the peak (the FLOP rules are in ``flops``).
_ABOVE_PEAK: Final[dict[str, str]] = {
    "conv": "cuDNN's Winograd/FFT algorithms do fewer multiplications than the direct "
    "formula counted",
    "gemm": "the {dtype} peak may be the wrong one (TF32/FP8 math?)",
    "attention": "the formula counts masked (causal) blocks the kernel skips, "
    "or the {dtype} peak is the wrong one",
    "elementwise": "the 1-FLOP-per-element model overstates this op, "
    "or the {dtype} peak is the wrong one",
}
#: A device or step window mixes families: name the usual culprits.
_ABOVE_PEAK_MIXED: Final = (
    "some op's FLOPs overstate the work (Winograd/FFT convs, causal attention) "
    "or a dtype's peak is the wrong one (TF32/FP8 math?)"
)
MEMBW_REASON: Final = (
    "above the memory bandwidth: the byte model overcounts (cached/reused operands)"
)


def suspect_reason(
    mfu: float | None,
    membw_share: float | None,
    family: str | None,
    peak_how: str,
    dtype: str | None = None,
) -> str | None:
    """The reason a row's figures are suspect (module rule), or None when they are plausible.
    ``family`` None means a window over several families; ``dtype`` is the peak's dtype."""
    if mfu is not None and mfu > 1.0:
        why = _ABOVE_PEAK.get(family or "", _ABOVE_PEAK_MIXED)
        return "above 100% of peak: " + why.format(dtype=dtype or "dtype's")
    if membw_share is not None and membw_share > 1.0:
        return MEMBW_REASON
    if peak_how in ASSUMED_HOWS and (mfu is not None or membw_share is not None):
        return f"peak assumed for an unnamed device ({peak_how})"
    return None


def flag_suspects(
    ops: Iterable[OpRow],
    families: Iterable[FamilyRow],
    mfu_rows: Iterable[MfuRow],
    peaks: dict[tuple[int, int], DevicePeak],
) -> None:
    """Set ``suspect``/``suspect_reason`` on every row in place (figures untouched)."""

    def how(rank: int, device: int) -> str:
        peak = peaks.get((rank, device))
        return peak.how if peak is not None else "unknown"

    for o in ops:
        reason = suspect_reason(o.mfu, o.membw_share, o.family, how(o.rank, o.device), o.peak_dtype)
        o.suspect, o.suspect_reason = reason is not None, reason
    for f in families:
        # the family row is measured against its main dtype's peak, which it does not keep
        reason = suspect_reason(f.mfu, f.membw_share, f.family, how(f.rank, f.device))
        f.suspect, f.suspect_reason = reason is not None, reason
    for m in mfu_rows:
        reason = suspect_reason(m.mfu, None, None, m.peak_how)
        m.suspect, m.suspect_reason = reason is not None, reason
