"""The args of a ``[memory]`` event (Kineto spelling; the nsys ingester writes the same): bytes
(negative = a free), the allocator's totals after the event (bytes), the device (type 0 CPU,
1 CUDA). A module of constants only: the Kineto reader's early scan imports it and must not
import polars (``tests/test_kineto_early.py``)."""

from __future__ import annotations

from typing import Final

ARG_MEM_BYTES: Final = "Bytes"
ARG_MEM_ALLOCATED: Final = "Total Allocated"
ARG_MEM_RESERVED: Final = "Total Reserved"
ARG_MEM_DEVICE_TYPE: Final = "Device Type"
ARG_MEM_DEVICE_ID: Final = "Device Id"
MEMORY_ARG_KEYS: Final = (
    ARG_MEM_BYTES,
    ARG_MEM_ALLOCATED,
    ARG_MEM_RESERVED,
    ARG_MEM_DEVICE_TYPE,
    ARG_MEM_DEVICE_ID,
)
