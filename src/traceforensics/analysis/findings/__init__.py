"""Findings: every way time is lost, ranked by the time each change would give back."""
