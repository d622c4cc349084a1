"""Which paths ``tf mcp`` may read: the directories given as ``--root`` (default: the working
directory), and nothing else.

A path from a tool call is confined before anything opens it:

* a relative path is looked up in each root in order, the first root holding it wins (no root
  holds it: the first root's, so the loader names the missing file); in the working
  directory it stays as typed, so its messages read as ``tf analyze PATH``'s;
* the path with every symlink resolved must lie inside a root, itself resolved: a link inside
  a root that points outside is refused like the outside path itself;
* a directory (a job's rank files) is read whole, so every file in it must resolve inside a
  root too: one link to a file outside refuses the directory, naming that file.

A refusal is an ``InputError`` (one line, the tool's error): the path, that it is outside the
roots, which roots there are and how to add one. With no ``--root`` the working directory is
the root, unless it is the file system's root (an editor may start the server in ``/``): then
``--root`` must be given. Nothing here opens or writes a file.

Limit: a path is checked when the call arrives and opened just after, by the path as given;
someone who can replace a folder of a root by a link in between could still lead a read
outside (docs/mcp.md).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from traceforensics.model.errors import InputError


@dataclass(frozen=True)
class Roots:
    """The directories tool calls may read, resolved (``tf mcp --root``)."""

    dirs: tuple[Path, ...]

    @classmethod
    def of(cls, given: Sequence[str]) -> Roots:
        """The roots named on the command line (none: the working directory); each must be
        an existing directory (``InputError`` otherwise)."""
        if not given and Path.cwd().resolve() == Path(Path.cwd().anchor):
            raise InputError(
                f"tf mcp: the working directory is {Path.cwd().anchor}, which would open the "
                "whole file system to the tools; name the folders with --root DIR"
            )
        out = []
        for text in given or (os.getcwd(),):
            path = Path(text).expanduser()
            if not path.is_dir():
                raise InputError(
                    f"--root {text!r}: not a directory; pass a folder that holds the traces"
                )
            out.append(path.resolve())
        return cls(tuple(dict.fromkeys(out)))

    def confine(self, text: str, field: str = "path") -> str:
        """The path to open for ``text`` (rules in the module docstring), or an
        ``InputError`` when it lies outside every root."""
        if not text or "\0" in text:
            raise InputError(f"{field} {text!r}: not a path; pass a trace file or directory")
        given = Path(text).expanduser()
        candidate = given if given.is_absolute() else self._find(given)
        try:
            real = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop
            raise InputError(f"{text}: cannot be resolved ({exc}); pass another path") from exc
        if not self._inside(real):
            raise self._outside(text)
        if real.is_dir():
            for entry in sorted(real.iterdir()):
                if entry.is_file() and not self._inside(entry.resolve()):
                    raise self._outside(f"{text}: {entry.name}")
        return str(candidate)

    def _inside(self, real: Path) -> bool:
        return any(real == root or real.is_relative_to(root) for root in self.dirs)

    def _outside(self, text: str) -> InputError:
        return InputError(
            f"{text}: outside the folders this server may read ({self.shown()}); ask for a "
            "path inside them, or start tf mcp with --root DIR to add one"
        )

    def _find(self, relative: Path) -> Path:
        cwd = Path.cwd().resolve()
        for root in self.dirs:
            if (root / relative).exists():
                return relative if root == cwd else root / relative
        return relative if self.dirs[0] == cwd else self.dirs[0] / relative

    def shown(self) -> str:
        """The roots as a message lists them."""
        return ", ".join(str(d) for d in self.dirs)
