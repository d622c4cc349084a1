"""Package data: the GPU peak table (gpu_peaks.csv)."""
