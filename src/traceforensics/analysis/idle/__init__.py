"""Idle attribution: every idle ns of a device split over causes, with evidence; the step and
per-stream views. Passes read the shared ``AnalysisContext``."""
