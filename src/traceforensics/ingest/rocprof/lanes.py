"""What the processes (lanes) of a rocprof Chrome trace hold, named by their ``process_name``.

rocprof does not write ``cat`` on its v1 events and writes its own lane numbers as ``pid``, so a
row's meaning comes from the label of its process, never from a fixed pid (v1 moved its pid
bases between releases: GPU lanes started at 4, later at 6):

==============================  =====  ==================================================
``process_name`` label          rocprof lane
==============================  =====  ==================================================
``CPU HIP API``                 v1     HIP runtime calls (one thread per ``tid``)
``CPU HSA API``                 v1     HSA runtime calls (``--hsa-trace``/``--sys-trace``)
``Markers and Ranges``          v1     roctx markers and ranges
``COPY``                        v1 v2  copies (and v1 fills) the GPU's DMA engines ran
``GPU<n>``                      v1     kernels of GPU ``n``; ``tid`` = rocprof's stream index
``GPU Barriers<n>``             v1     barrier packets of GPU ``n``
``CPU``                         v2     HIP and HSA calls and roctx ranges (``tid`` = thread)
``GPU``                         v2     kernels; ``tid`` = agent number + 1
``HIPBLITKERNELS``              v2     HIP operations that are not copies (fills, barriers);
                                       ``tid`` = agent number
==============================  =====  ==================================================

This module imports nothing heavy: ``ingest.detect`` uses it to sniff the producer.
"""

from __future__ import annotations

import re
from typing import Final, Literal

Lane = Literal["api", "ranges", "copy", "gpu", "barrier", "blit", "cpu"]

#: Exact labels and what their lane holds.
LABELS: Final[dict[str, Lane]] = {
    "CPU HIP API": "api",
    "CPU HSA API": "api",
    "Markers and Ranges": "ranges",
    "COPY": "copy",
    "CPU": "cpu",
    "GPU": "gpu",
    "HIPBLITKERNELS": "blit",
}
#: Labels only v1 (``rocprof``'s ``tblextr.py``) writes; the v2 JSON plugin writes exactly
#: ``CPU``, ``GPU``, ``COPY`` and ``HIPBLITKERNELS``.
V1_ONLY: Final = frozenset({"CPU HIP API", "CPU HSA API", "Markers and Ranges"})
V2_LABELS: Final = frozenset({"CPU", "GPU", "COPY", "HIPBLITKERNELS"})
#: ``GPU<n>`` / ``GPU Barriers<n>`` (v1: no space before the number, unlike Kineto's ``GPU 0``).
GPU_LABEL: Final = re.compile(r"^GPU(\d+)$")
BARRIER_LABEL: Final = re.compile(r"^GPU Barriers(\d+)$")


def lane_of(label: str) -> tuple[Lane, int | None] | None:
    """``(lane, device number the label names or None)`` of a ``process_name`` label, None for
    a label rocprof does not write."""
    if label in LABELS:
        return LABELS[label], None
    for pattern, lane in ((GPU_LABEL, "gpu"), (BARRIER_LABEL, "barrier")):
        match = pattern.match(label)
        if match:
            return lane, int(match.group(1))  # type: ignore[return-value]
    return None


def producer_of(labels: set[str]) -> str | None:
    """``"rocprof-v1"``, ``"rocprof-v2"`` or None (not rocprof) from a trace's process labels.

    v1 when any label is one only v1 writes (``GPU<n>``, ``CPU HIP API``, ...); v2 when every
    label is one of v2's four and ``GPU`` or ``CPU`` is among them (a lone ``COPY`` says too
    little); anything else (a Kineto ``GPU 0``, a process's own name) is not rocprof."""
    if not labels:
        return None
    known = {label for label in labels if lane_of(label) is not None}
    if any(label in V1_ONLY or GPU_LABEL.match(label) for label in known):
        return "rocprof-v1"
    if labels <= V2_LABELS and labels & {"GPU", "CPU"}:
        return "rocprof-v2"
    return None
