"""``tf mcp``'s server: the tools of ``cli.mcp_tools`` and two documents, served over stdio
with the Model Context Protocol's own SDK (``mcp``, the optional extra
``traceforensics[mcp]``; imported only by this module).

Each tool has a schema (its parameters, with what each means) and a description that says
when to use it; its answer is the view as compact JSON text, and the same object as structured
content. A failure is a tool error whose text is the one line ``tf`` prints for it
(``cli.main.error_line``: ``tf: error: FILE: what is wrong; what to do``), and the server goes
on serving. The server writes nothing on stdout but the protocol: the SDK moves the process's
own stdout to stderr while it serves, so a stray print, a warning or a child process cannot
break the stream.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Final

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from traceforensics._version import __version__
from traceforensics.cli.history import HISTORY_LIMIT
from traceforensics.cli.main import error_line
from traceforensics.cli.mcp_tools import Tools
from traceforensics.history.figures import names_shown
from traceforensics.report.format import one_line
from traceforensics.report.views import SHOWN
from traceforensics.report.views_fit import compact

#: What an assistant is told about the server when it connects.
INSTRUCTIONS: Final = (
    "traceforensics reads GPU profiler traces (PyTorch Profiler/Kineto .json/.json.gz, Nsight "
    "Systems .sqlite/.nsys-rep, a directory of rank files) and says where the GPU's time "
    "went: every idle nanosecond attributed to a cause, and findings ranked by the time each "
    "change gives back. Start with `analyze` on the trace; then `findings`, `gaps` and `gap` "
    "for the evidence, `kernels` for short kernels and MFU, `ranks` for a multi-rank job, "
    "`diff` to check whether a change worked, `history` for stored runs, `explain` for what "
    "an id means. Times are integer nanoseconds (fields ending _ns), shares are fractions "
    "0-1. Answers are cut to fit: `more` says what was left out and which call or command "
    "has it. Only paths inside the server's roots can be read."
)
#: The documents served as resources: URI -> (file in docs/, what it holds).
DOCS: Final = {
    "traceforensics://docs/causes.md": ("causes.md", "Every idle cause: what it means, how "
                                        "it is detected, what to do"),
    "traceforensics://docs/findings.md": ("findings.md", "Every finding category and how its "
                                          "time to give back is estimated"),
}  # fmt: skip

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

Path_ = Annotated[
    str,
    Field(
        description="A trace file (.json, .json.gz, .sqlite, .nsys-rep), a directory of rank "
        "files, or (diff) a saved `tf analyze --json` file; absolute, or relative to a root"
    ),
]
Steps = Annotated[
    str | None,
    Field(description="Only these steps, by number: '3:' (from step 3), ':5', '2:5' or '4'"),
]
Window = Annotated[
    str | None,
    Field(
        description="'device' (first to last GPU work, the default), 'trace' (the whole "
        "trace) or 'FROM:TO', times after the trace's first event ('1.5s:3s', '200ms:')"
    ),
]


class Server(MCPServer):
    """``MCPServer`` whose argument errors are one line too: a value of the wrong type (the
    schema's check, before the tool runs) answers ``tf: error: TOOL: FIELD VALUE: what is
    wrong``, like every other error, and so does a tool that does not exist; the range of a
    value is the tool's own rule."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return _error(argument_error(name, arguments, exc.__cause__))
            if self._tool_manager.get_tool(name) is None:
                tools = ", ".join(DESCRIPTIONS)
                return _error(one_line(f"tf: error: no tool named {name!r}; the tools: {tools}"))
            raise


def argument_error(tool: str, arguments: dict[str, Any], exc: ValidationError) -> str:
    """The one line of a tool call whose arguments do not fit its schema (the first error)."""
    err = exc.errors()[0]
    field = ".".join(str(part) for part in err["loc"]) or "arguments"
    given = f" {arguments[field]!r}" if field in arguments else ""
    return one_line(f"tf: error: {tool}: {field}{given}: {err['msg']}; see the tool's schema")


def _error(line: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=line)], is_error=True)


def build_server(tools: Tools) -> Server:
    """The server with every tool and document registered."""
    app = Server(
        "traceforensics", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )
    for fn in _tools(tools):
        app.add_tool(_answering(fn), description=DESCRIPTIONS[fn.__name__], annotations=_READ_ONLY)
    for uri, (name, what) in DOCS.items():
        app.resource(uri, name=name, description=what, mime_type="text/markdown")(
            functools.partial(doc_text, name)
        )
    return app


def doc_text(name: str) -> str:
    """A document of docs/: from the installed package (``data/docs``, copied by the build),
    else from the source tree beside the package."""
    packaged = resources.files("traceforensics").joinpath("data", "docs", name)
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    return (Path(__file__).resolve().parents[3] / "docs" / name).read_text(encoding="utf-8")


def _answering(fn: Callable[..., dict[str, Any]]) -> Callable[..., CallToolResult]:
    """``fn`` as a tool: its view as JSON text and structured content, or its error as the
    command's one line (``is_error``)."""

    @functools.wraps(fn)
    def tool(*args: Any, **kwargs: Any) -> CallToolResult:
        try:
            view = fn(*args, **kwargs)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            return _error(error_line(exc)[0])
        return CallToolResult(
            content=[TextContent(type="text", text=compact(view))], structured_content=view
        )

    tool.__annotations__ = {**fn.__annotations__, "return": CallToolResult}
    return tool


#: What each tool is for and when to use it (the description an assistant chooses by).
DESCRIPTIONS: Final = {
    "analyze": "Where the GPU's time went in one trace or rank directory: the verdict per "
    "device (idle share, dominant idle cause, first change to make), the top findings ranked "
    "by time to give back, with remedies and evidence, and each device's busy/idle figures. "
    "Call this first on any trace.",
    "findings": "Every finding of a trace (or of one category), largest time to give back "
    "first, each with its remedy, confidence and evidence events. Use it after analyze to "
    "see beyond the top findings or to focus on one cause.",
    "gaps": "The largest idle gaps of a trace, largest first: when each started, how long it "
    "lasted and the causes it is attributed to. Use it to see what the GPU waited for, gap by "
    "gap (start pages through them); then gap(index) for one gap's evidence.",
    "gap": "One idle gap whole: its causes in ns and every evidence event (the host ranges, "
    "API calls and copies it was attributed from). Use it to check or explain one "
    "attribution.",
    "kernels": "Short kernels (launch-bound work, with what to fuse), MFU per device against "
    "the chip's peak, the op families by kernel time (compute- or memory-bound) and the "
    "longest kernels. Use it when the GPU is busy but slow.",
    "ranks": "A multi-rank job (a directory of rank files): the straggler the other ranks "
    "wait for and why, each rank's step time, idle causes and waits, and which rank arrived "
    "last per step. Use it for 'why is rank N slow'.",
    "diff": "Did a change work? Compares two runs (traces, rank directories or saved "
    "analyses, or a stored baseline) cause by cause: the verdict, the figures that moved "
    "beyond step-to-step noise, the findings and kernels that changed, and CI rules "
    "(fail_on) with their outcome.",
    "history": "Runs stored with tf analyze --store: the newest runs with their figures, or "
    "one figure's trend over them. Use it for 'did this get slower over time'.",
    "explain": "What a cause, finding category or diagnostic code means, how it is detected "
    "and what to do about it. Without an id: every id.",
}

Category = Annotated[
    str | None,
    Field(
        description="Only this finding category, e.g. data_loading, host_sync, "
        "exposed_communication (explain lists them)"
    ),
]
Top = Annotated[int, Field(description="How many rows of each list (1 or more)")]
Start = Annotated[
    int,
    Field(
        description="The index of the first gap listed (0: the largest); the answer's `more` "
        "names the next start"
    ),
]
Index = Annotated[int, Field(description="The gap's `index` in the gaps answer (0: the largest)")]
After = Annotated[
    str,
    Field(
        description="The run after the change: a trace, rank directory or saved "
        "tf analyze --json file"
    ),
]
Before = Annotated[
    str | None,
    Field(description="The run before the change (the same kinds as after); or give baseline"),
]
FailOn = Annotated[
    list[str] | None,
    Field(
        description="CI rules as tf diff --fail-on takes them, e.g. 'step_time>+5%', "
        "'idle.data_loading>+20%', 'mfu<-3%'"
    ),
]
Baseline = Annotated[
    str | None,
    Field(
        description="Instead of before: a run stored with tf analyze --store, by selector "
        "(branch=main, #12); the newest match"
    ),
]
Labels = Annotated[
    list[str] | None, Field(description="Only runs with these labels, KEY=VALUE (all must match)")
]
Figure = Annotated[
    str | None,
    Field(
        description=f"Follow this figure over the runs: {names_shown()} (e.g. idle.data_loading)"
    ),
]
Limit = Annotated[int, Field(description="The newest N runs (1 or more)")]
Id = Annotated[
    str | None,
    Field(
        description="A cause, finding category or diagnostic code (host_sync, data_loading, "
        "gpu_activity_missing); none lists them all"
    ),
]


def _tools(t: Tools) -> list[Callable[..., dict[str, Any]]]:
    """Each tool with its typed signature (the schema); named as the tools are."""

    def analyze(path: Path_, steps: Steps = None, window: Window = None) -> dict[str, Any]:
        return t.analyze(path, steps, window)

    def findings(
        path: Path_, category: Category = None, steps: Steps = None, window: Window = None
    ) -> dict[str, Any]:
        return t.findings(path, category, steps, window)

    def gaps(
        path: Path_,
        top: Top = SHOWN["gaps"],
        start: Start = 0,
        steps: Steps = None,
        window: Window = None,
    ) -> dict[str, Any]:
        return t.gaps(path, top, start, steps, window)

    def gap(
        path: Path_, index: Index, steps: Steps = None, window: Window = None
    ) -> dict[str, Any]:
        return t.gap(path, index, steps, window)

    def kernels(
        path: Path_, top: Top = SHOWN["kernels"], steps: Steps = None, window: Window = None
    ) -> dict[str, Any]:
        return t.kernels(path, top, steps, window)

    def ranks(path: Path_, steps: Steps = None, window: Window = None) -> dict[str, Any]:
        return t.ranks(path, steps, window)

    def diff(
        after: After, before: Before = None, fail_on: FailOn = None, baseline: Baseline = None
    ) -> dict[str, Any]:
        return t.diff(before, after, fail_on or (), baseline)

    def history(
        label: Labels = None, figure: Figure = None, limit: Limit = HISTORY_LIMIT
    ) -> dict[str, Any]:
        return t.history(label or (), figure, limit)

    def explain(id: Id = None) -> dict[str, Any]:
        return t.explain(id)

    return [analyze, findings, gaps, gap, kernels, ranks, diff, history, explain]
