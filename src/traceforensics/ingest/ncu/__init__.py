"""Nsight Compute CSV reports (``ncu --csv``, the ``details`` and ``raw`` pages): one row per
profiled kernel launch with the throughput figures the bottleneck rule reads.

Both pages are read by header name, never by position (the id columns changed across ncu
versions: ``Kernel Time`` went, ``Block Size``/``Grid Size``/``Device``/``CC`` and the rule
columns came):

- details (the default page): long, one row per (launch, section, metric) with ``Section
  Name``, ``Metric Name``, ``Metric Unit``, ``Metric Value``; rule rows (no metric name) are
  skipped. Metrics by label: ``Compute (SM) Throughput`` (older ``Compute (SM) [%]``, ``SM
  [%]``), ``Memory Throughput`` (``Memory [%]``), ``DRAM Throughput``, ``Duration``,
  ``Achieved Occupancy``, ``Theoretical Occupancy``, ``Waves Per SM``;
- raw (``--page raw``): wide, one row per launch after a row of units; metrics by counter name
  (``sm__throughput.avg.pct_of_peak_sustained_elapsed``, ...).

A ``*_pct`` figure is read only from a value in ``%`` (or without a unit), the Speed Of Light
section's first; ``Process ID`` and ``Device`` are kept (``process_id``, ``device``).
Values are quoted text that may carry thousands separators (``"1,234.56"``); ``==PROF==``
lines before or after the table are skipped. Durations are converted to integer ns by their
unit (``ns``/``nsecond``, ``us``/``usecond``, ``ms``/``msecond``, ``s``/``second``).
"""

from traceforensics.ingest.ncu.reader import NCU_SCHEMA, read_ncu_csv

__all__ = ["NCU_SCHEMA", "read_ncu_csv"]
