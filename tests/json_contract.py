"""Field names the issues fixed as JSON contracts (docs/json-output.md); tests share them."""

from __future__ import annotations

DEVICE_FIELDS = frozenset(
    {
        "rank",
        "device",
        "name",
        "window_ns",
        "busy_ns",
        "idle_ns",
        "kernel_count",
        "memcpy_count",
        "memset_count",
        "idle_by_cause",
        "exposed_comm_ns",
        "comm_ns",
        "utilization",
        "mfu",
        "busy_by_kind",
        "transfers",
        "copy_ns",
        "exposed_copy_ns",
    }
)
STEP_FIELDS = frozenset(
    {
        "rank",
        "device",
        "name",
        "start_ns",
        "dur_ns",
        "busy_ns",
        "idle_ns",
        "idle_by_cause",
        "exposed_comm_ns",
    }
)
GAP_FIELDS = frozenset({"rank", "device", "start_ns", "dur_ns", "causes", "evidence"})
EVIDENCE_FIELDS = frozenset({"cause", "kind", "name", "start_ns", "dur_ns", "tid", "detail"})
SHORT_KERNEL_FIELDS = frozenset(
    {"name", "launching_op", "count", "total_ns", "mean_ns", "recoverable_ns", "remedy"}
)
OP_FIELDS = frozenset(
    {
        "op",
        "shapes",
        "dtype",
        "flops",
        "bytes",
        "kernel_ns",
        "tflops",
        "peak_tflops",
        "mfu",
        "bound",
    }
)
FINDING_FIELDS = frozenset(
    {
        "category",
        "rank",
        "device",
        "recoverable_ns",
        "share_of_window",
        "title",
        "remedy",
        "evidence",
        "confidence",
    }
)
TRANSFER_FIELDS = frozenset({"direction", "count", "bytes", "time_ns", "gbps", "pageable_count"})
PROGRAM_FIELDS = frozenset({"framework", "vendor", "evidence"})
DIAGNOSTIC_FIELDS = frozenset({"code", "message"})
HOST_FIELDS = frozenset({"step_source", "step_count", "step_ns", "phase_ns", "steps"})
HOST_STEP_FIELDS = frozenset({"rank", "name", "number", "start_ns", "dur_ns", "phase_ns"})
HOST_PHASES = ("data_loading", "forward", "backward", "optimizer", "other")
