"""``tf mcp``: the analysis as a Model Context Protocol server over stdio, for an assistant
in the editor (docs/mcp.md). Wiring only: the tools are ``cli.mcp_tools``, the protocol
``cli.mcp_server`` (the optional extra ``traceforensics[mcp]``)."""

from __future__ import annotations

import os

import click

from traceforensics.cli.options import EXIT_CODES_HELP
from traceforensics.model.errors import InputError


@click.command(
    "mcp",
    short_help="Serve the analysis to an assistant (Model Context Protocol over stdio).",
    epilog="\b\nExamples:\n"
    "  tf mcp\n"
    "  tf mcp --root ~/traces --root /shared/runs\n"
    "  tf mcp --root . --store postgresql+psycopg://ci@db/perf\n\n"
    "Register it with an MCP client as the command `tf` with the arguments `mcp --root DIR`"
    " (docs/mcp.md).\n" + EXIT_CODES_HELP,
)
@click.option(
    "--root",
    "roots",
    multiple=True,
    metavar="DIR",
    help="A folder whose traces the tools may read (repeatable; default: the working "
    "directory). Any other path is refused.",
)
@click.option(
    "--store",
    default=None,
    metavar="URL",
    help="The history store the history tool and diff baselines read (default: the local "
    "store, or $TF_HISTORY_URL).",
)
@click.option("--no-cache", is_flag=True, help="Do not read or write the analysis cache.")
def mcp_command(roots: tuple[str, ...], store: str | None, no_cache: bool) -> None:
    """Serve traceforensics' tools over stdio (Model Context Protocol) until the client
    closes the stream: analyze, findings, gaps, gap, kernels, ranks, diff, history, explain."""
    try:
        from traceforensics.cli.mcp_server import build_server
    except ImportError as exc:
        raise InputError(
            f"tf mcp needs the Model Context Protocol SDK ({exc.name or exc}: not installed); "
            "install it with pip install 'traceforensics[mcp]'"
        ) from exc
    from traceforensics.cli.mcp_roots import Roots
    from traceforensics.cli.mcp_tools import Tools
    from traceforensics.ingest.nsys.export import EXPORT_SETTING

    # nothing is written beside the inputs: a .nsys-rep's SQLite export goes to the cache too
    os.environ[EXPORT_SETTING] = "cache"

    tools = Tools(Roots.of(roots), store=store, use_cache=not no_cache)
    if store is not None:  # a bad store URL is refused now, not at the first history call
        from traceforensics import history

        history.check_url(store)
    build_server(tools).run("stdio")
