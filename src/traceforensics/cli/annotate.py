"""``tf analyze TRACE --annotate OUT.json.gz``: the trace with tf's answer as tracks, for Perfetto
UI and ``chrome://tracing`` (the writer: ``report.annotate``; the input's own events: ``ingest``).

Wiring only: which way the input's events are copied (``report.annotate.document``) follows
from what was loaded:

- one Kineto file: copied byte for byte (``passthrough.splice``), unless the reader left a
  note on it (cut and salvaged, NaN literals, an array without its ``]``: text that is not
  plain JSON) or the copy cannot find its event list: then its events are re-encoded, each
  unchanged as a JSON value (``passthrough.moved_events``);
- a directory of Kineto rank files: each file's events moved to its rank's process;
- anything else (Nsight Systems, rocprof): the event table converted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import click

from traceforensics.cli.options import check_output
from traceforensics.model.errors import CorruptTraceError, InputError

if TYPE_CHECKING:  # the writer and the readers are imported by a run that annotates
    from traceforensics.analysis.pipeline import Analysis
    from traceforensics.report.annotate.document import Moved
    from traceforensics.report.annotate.layout import Layout

ANNOTATE_HELP = (
    "Also write the trace with tf's answer as extra tracks (idle: CAUSE slices, steps, "
    "findings, arrows from gaps to their evidence) for Perfetto UI or chrome://tracing: "
    "a Chrome-trace .json or .json.gz."
)


def write_annotation(result: Analysis, path: str, out: Path) -> Layout:
    """Write ``result``'s annotated trace of input ``path`` to ``out`` (module docstring)."""
    from traceforensics.analysis.idle.pieces import idle_pieces
    from traceforensics.ingest.kineto.passthrough import id_forms, refuse_annotated, splice
    from traceforensics.ingest.kineto.text import NotStreamableError
    from traceforensics.report.annotate.document import write_annotated

    session = result.session
    pieces = idle_pieces(session, result.options)
    if session.meta.source_format != "kineto":
        return write_annotated(result, pieces, out)
    files = [(Path(i.path), i.rank) for i in session.meta.inputs]
    for f, _ in files:
        refuse_annotated(f)
    moved = {r: _mover(f) for f, r in files}
    # the reader's notes on a file (cut, NaN literals, an unclosed array) say its text is
    # not plain JSON: its events are re-encoded instead of copied
    noted = any(w.startswith(f"{f}:") for f, _ in files for w in session.meta.warnings)
    if len(files) != 1 or noted:
        return write_annotated(result, pieces, out, moved=moved)
    src = files[0][0]

    def copy(fh: BinaryIO, insert: Iterable[bytes], top: bytes) -> None:
        splice(src, fh, insert, top)

    try:
        return write_annotated(result, pieces, out, splice=copy, text_ids=id_forms(src))
    except (CorruptTraceError, NotStreamableError):  # a shape only the generic reader reads
        return write_annotated(result, pieces, out, moved=moved)


def _mover(path: Path) -> Moved:
    from traceforensics.ingest.kineto.passthrough import moved_events

    def events(
        track: Callable[[Any, Any], tuple[Any, Any]],
        shift_ns: int,
        flow_id: Callable[[Any], Any],
        on_name: Callable[..., None] | None,
    ) -> Iterator[bytes]:
        return moved_events(path, track, shift_ns, flow_id, on_name)

    return events


annotate_option = click.option(
    "--annotate",
    "annotate_path",
    type=click.Path(path_type=Path),
    default=None,
    metavar="OUT.json.gz",
    help=ANNOTATE_HELP,
)


def check_annotate(out: Path | None, inputs: list[str]) -> None:
    """Refuse an ``--annotate`` destination that is an input, a directory, in a missing
    directory, or not named as a Chrome trace."""
    if out is None:
        return
    check_output(out, inputs, "--annotate")
    if not out.name.lower().endswith((".json", ".json.gz")):
        raise InputError(
            f"{out}: --annotate writes a Chrome trace; end the name in .json.gz or .json"
        )
