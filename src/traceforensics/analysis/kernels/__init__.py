"""Kernel forensics: short kernels worth fusing, FLOPs per op, achieved TFLOPS and MFU."""
