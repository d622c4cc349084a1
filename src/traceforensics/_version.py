"""The tool version, defined once (pyproject.toml repeats it for packaging)."""

__version__ = "0.1.0"
