"""The compiled parts of the package (issue 12): the Kineto column scanner, the row-list
packer and the host op tree's stack sweep.

Everything else is declared in ``pyproject.toml``. The extensions are optional: without a C
compiler the install still succeeds: the Kineto reader uses its pure-Python decoder
(``traceforensics.ingest.kineto.colscan.AVAILABLE`` says which one runs), the early scan sends
its row lists as lists (``rows.PACKER``) and the op tree is found columnar (``optree.SWEEP``).
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
            "traceforensics.analysis._optree",
            ["src/traceforensics/analysis/_optree.c"],
            extra_compile_args=["-O2", "-std=c99", "-Wall", "-Wextra"],
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
