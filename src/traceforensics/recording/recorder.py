"""``capture()``: record a training loop with ``torch.profiler`` set up for this analysis, then
analyse what was recorded.

::

    with traceforensics.capture("runs/prof") as cap:
        for batch in cap.loader(train_loader):   # or: ... cap.step() at the end of each iteration
            train_step(batch)

One file per rank (``inject.write_trace``) is written when the schedule's active window ends
(or, when the block ends inside it, at the end of the block: the last step then runs to the end
of the block). On a normal exit rank 0 analyses its own file and prints the verdict
(``print_verdict``) or only keeps it (``Capture.analysis``); other ranks only record
(``tf analyze OUT_DIR`` reads every rank). An exception inside the block stops the
profiler, keeps what was written and propagates, unanalysed.

Step counting: ``ProfilerStep#0`` starts with the block; every ``step()`` ends one step and
starts the next, so with ``wait=2, warmup=2, active=5`` the block needs 9 ``step()`` calls for
the window ``#4``..``#8`` to be recorded whole.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from traceforensics.model.errors import InputError, TraceForensicsError
from traceforensics.recording.inject import new_profiler, process_rank, write_trace
from traceforensics.recording.loader import timed_batches
from traceforensics.recording.settings import CaptureSettings, require_torch
from traceforensics.recording.summary import capture_report, no_trace_message, partial_note
from traceforensics.report.format import one_line

if TYPE_CHECKING:
    from torch.profiler import profile

    from traceforensics.analysis.pipeline import Analysis

T = TypeVar("T")


class Capture:
    """One recording: ``step()``, ``loader()``; after the block ``traces`` (files written, in
    cycle order), ``analysis`` (rank 0's last cycle, or None) and ``report`` (the printed
    text)."""

    def __init__(
        self, out_dir: Path, settings: CaptureSettings, analyze: bool, print_verdict: bool
    ) -> None:
        self.out_dir = out_dir
        self.settings = settings
        self.analyze = analyze
        self.print_verdict = print_verdict
        self.rank = 0
        self.steps = 0
        self.traces: list[Path] = []
        self.analysis: Analysis | None = None
        self.report = ""
        self._cfg = settings.config(out_dir)
        self._prof: profile | None = None
        self._loader_steps = False

    def __enter__(self) -> Capture:
        require_torch()
        self.rank = process_rank()
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(
                f"{self.out_dir}: cannot create the trace folder ({exc.strerror}); pass another"
            ) from None
        prof = new_profiler(self._cfg, self._write)
        try:
            prof.start()
        except RuntimeError as exc:  # another profiler is running in this process
            raise InputError(
                f"capture: the profiler did not start ({one_line(str(exc))}); stop the other "
                "profiler first"
            ) from None
        self._prof = prof
        return self

    def step(self) -> None:
        """End the current step and start the next: call once per training iteration."""
        if self._prof is None:
            raise InputError("capture: step() outside the with block; call it inside")
        self._prof.step()
        self.steps += 1

    def loader(self, iterable: Iterable[T], *, step: bool = True) -> Iterator[T]:
        """``iterable``'s items, each fetch a data-loading range (``capture.loader``); with
        ``step`` every batch is one profiler step (do not call ``step()`` as well)."""
        if step and self._loader_steps:
            raise InputError("capture: a second stepping loader; pass step=False to all but one")
        self._loader_steps = self._loader_steps or step
        return timed_batches(iterable, self.step if step else None)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        prof, self._prof = self._prof, None
        if prof is not None:
            prof.stop()  # inside the active window: writes what was recorded
        if exc_type is None:
            self._finish()

    def _write(self, prof: profile) -> None:
        """``on_trace_ready``: one file per cycle (``inject.write_trace``)."""
        self.traces.append(write_trace(prof, self._cfg, self.rank, len(self.traces) + 1))

    def _finish(self) -> None:
        if not self.traces:
            raise InputError(no_trace_message(self.settings, self.steps, "step() calls"))
        note = partial_note(self.settings, self.steps)
        if not self.analyze or self.rank != 0:
            if note:
                print(f"tf capture: {note}", file=sys.stderr)
            return
        from traceforensics.analysis.options import AnalysisOptions
        from traceforensics.analysis.pipeline import analyze
        from traceforensics.ingest import load_path

        try:
            self.analysis = analyze(load_path(str(self.traces[-1])), AnalysisOptions.of())
        except TraceForensicsError as exc:  # the run is done: say so, never lose it
            print(
                f"tf capture: {self.traces[-1]} was written but not analysed: {one_line(str(exc))}",
                file=sys.stderr,
            )
            return
        self.report = capture_report(self.analysis, self.traces, self.steps, self.settings, note)
        if self.print_verdict:
            sys.stdout.write(self.report)
            sys.stdout.flush()


def capture(
    out_dir: str | os.PathLike[str],
    *,
    analyze: bool = True,
    print_verdict: bool = True,
    **settings: Any,
) -> Capture:
    """A context manager recording the block with ``torch.profiler`` into ``out_dir`` (module
    docstring). ``settings``: the ``CaptureSettings`` fields (``wait=2, warmup=2, active=5,
    repeat=1, record_shapes=True, with_stack=False, profile_memory=False, cuda=None,
    gzip=True``). ``analyze=False`` only records; ``print_verdict=False`` analyses without
    printing (read ``cap.analysis``, ``cap.report``). Needs ``torch``
    (``pip install 'traceforensics[capture]'``)."""
    checked = CaptureSettings.of(**settings)
    require_torch()  # here, not only on entering the block: the error comes at the call
    return Capture(Path(out_dir), checked, analyze, print_verdict)
