"""The compiled part of the package: the Kineto column scanner (``_colscan.c``).

Everything else is declared in ``pyproject.toml``. The extension is optional: without a C
compiler the install still succeeds and the Kineto reader reads every file by its generic path
(``traceforensics.ingest.kineto.colscan.AVAILABLE`` says whether the scanner runs).
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
    ]
)
