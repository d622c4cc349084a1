"""Monitoring logs (nvidia-smi, dmon, dcgmi): the log's own report and throttle episodes."""
