"""The compiled part of the package: the Kineto column scanner (issue 12).

Everything else is declared in ``pyproject.toml``. The extension is optional: without a C
compiler the install still succeeds and the Kineto reader uses its pure-Python decoder
(``traceforensics.ingest.kineto.colscan.AVAILABLE`` says which one runs).
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
        )
    ]
)
