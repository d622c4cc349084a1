"""The compiled part of the package: the Kineto column scanner (``_colscan.c``).

Everything else is declared in ``pyproject.toml``. The extension is optional: without a C
compiler the install still succeeds and the Kineto reader reads every file by its generic path
(``traceforensics.ingest.kineto.colscan.AVAILABLE`` says whether the scanner runs).

The build also copies the documents ``tf mcp`` serves (``SERVED_DOCS``) into the package's
``data/docs``: an installed package has no ``docs/`` folder beside it (a source checkout reads
them from ``docs/``, ``cli.mcp_server.doc_text``).
"""

import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

#: The documents ``tf mcp`` serves as resources.
SERVED_DOCS = ("causes.md", "findings.md")


class BuildWithDocs(build_py):
    """``build_py`` that also puts ``docs/SERVED_DOCS`` into ``traceforensics/data/docs``."""

    def run(self) -> None:
        super().run()
        here = Path(__file__).resolve().parent / "docs"
        target = Path(self.build_lib) / "traceforensics" / "data" / "docs"
        for name in SERVED_DOCS:
            if (here / name).is_file():  # (an sdist without docs/ builds without them)
                target.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(here / name, target / name)


setup(
    cmdclass={"build_py": BuildWithDocs},
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
    ],
)
