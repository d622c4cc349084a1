"""The compiled part of the package: the Kineto column scanner and the row-list packer
(issue 12).

Everything else is declared in ``pyproject.toml``. The extensions are optional: without a C
compiler the install still succeeds, the Kineto reader uses its pure-Python decoder
(``traceforensics.ingest.kineto.colscan.AVAILABLE`` says which one runs) and the early scan
sends its row lists as lists (``rows.PACKER``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "traceforensics.ingest.kineto._colscan",
            ["src/traceforensics/ingest/kineto/_colscan.c"],
            extra_compile_args=[
                "-O2",
                "-std=c99",
                "-Wall",
                "-Wextra",
                "-Wno-missing-field-initializers",
            ],
            optional=True,
        ),
        Extension(
            "traceforensics.ingest.kineto._intpack",
            ["src/traceforensics/ingest/kineto/_intpack.c"],
            extra_compile_args=["-O2", "-std=c99", "-Wall", "-Wextra"],
            optional=True,
        ),
    ]
)
