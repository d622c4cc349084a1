"""Utilization patterns: the busy-fraction timeline of each device and the shape of its curve."""
