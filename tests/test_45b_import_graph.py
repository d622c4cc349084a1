"""The import graph of ``src/traceforensics``: no circles, and imports only go down.

Every module is parsed with ``ast``; every ``import``/``from ... import`` at any level (inside
functions and ``if TYPE_CHECKING:`` blocks too: a lazy import that dodges a circle is still
that circle) becomes an arrow to the module it names (``from pkg import sub`` names the
submodule ``pkg.sub`` when it exists, else the package ``pkg``; relative imports resolved).
Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``: those implicit arrows are
not counted, a package's own modules import it that way.

Rules:

1. no import circles anywhere;
2. inside ``analysis/``, the root modules are the shared layer under the passes and never
   import a pass subpackage (``idle``, ``kernels``, ``findings``, ``ranks``, ``utilization``,
   ``monitoring``). The one exception is the runner on top of them (``TOP_OF_ANALYSIS``);
3. the packages are layered (``LAYERS``): a package imports only packages of lower layers, or
   its own.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = "traceforensics"

#: Subpackages of ``analysis`` holding passes (serving and memory: issue 48).
PASSES = ("idle", "kernels", "findings", "ranks", "utilization", "monitoring", "serving", "memory")
#: Root modules of ``analysis`` above the passes: the runner that calls every pass and folds
#: their results into ``Analysis`` (with its JSON object and frames), the package facade that
#: re-exports it, and the per-device record, tables and step work sizes (issue 47: read over
#: the idle pass's steps) built from the pass results.
TOP_OF_ANALYSIS = frozenset(
    {
        "traceforensics.analysis",
        "traceforensics.analysis.pipeline",
        "traceforensics.analysis.devices",
        "traceforensics.analysis.frames",
        "traceforensics.analysis.work_size",
    }
)
#: Root -> pass arrows still to be removed (a fix removes its entry; none left since the
#: classifier's name patterns moved to ``analysis/names.py`` and its threshold to ``classify.py``).
OPEN_ROOT_IMPORTS: frozenset[str] = frozenset()

#: Layer of each top-level package or module (higher imports lower; same layer: only itself).
#: ingest -> model <- analysis <- report <- cli; the rest placed by what they are for.
LAYERS: Mapping[str, int] = {
    "_version": 0,  # the version string
    "data": 0,  # data files (the GPU peak table)
    "model": 1,  # the session, schema and units: imports nothing of ours but the version
    "_allocator": 1,  # the allocator setting (environment only)
    "errors": 2,  # re-exports model.errors for the public API
    "cache": 2,  # the cache of sessions and analyses (entries hold model objects)
    "ingest": 4,  # readers: files -> model
    "analysis": 5,  # passes over a model session
    "compare": 6,  # two analyses' JSON objects -> a verdict
    "history": 7,  # the run store: compare's figures over stored runs
    "report": 8,  # renderers of analyses, diffs and history
    "fanout": 8,  # a job's ranks analysed apart, merged (ingest + analysis)
    "recording": 9,  # ``tf.record``: a recorded run summarised with report's renderers
    "cli": 10,  # the commands
    "": 11,  # the package root: the public API (``load``, ``analyze``, ``capture``) over all
}

#: Violations of these rules that exist today, each to be fixed in the file named (listed so
#: that a new one fails at once; each entry must still occur, so a fix removes its entry).
#: A circle is named by one of its modules.
OPEN_CYCLES: Mapping[str, str] = {}
OPEN_LAYER_VIOLATIONS: Mapping[str, str] = {}


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module under ``src/traceforensics``: dotted name -> (path, is a package); a
    compiled extension by its stub (``.pyi``: it imports nothing of ours)."""
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted([*(SRC / PKG).rglob("*.py"), *(SRC / PKG).rglob("*.pyi")]):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def _targets(
    name: str, is_pkg: bool, node: ast.Import | ast.ImportFrom, known: set[str]
) -> Iterator[str]:
    """Modules of ours that one import statement of module ``name`` names."""
    if isinstance(node, ast.Import):
        found = [a.name for a in node.names]
    else:
        if node.level:
            base = name.split(".") if is_pkg else name.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        found = [
            f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names
        ]
    for named in found:
        if named != PKG and not named.startswith(PKG + "."):
            continue
        target = named
        while target not in known and "." in target:  # an attribute: its module
            target = target.rsplit(".", 1)[0]
        if target in known and target != name:
            yield target


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (any level of the file)."""
    mods = _modules()
    known = set(mods)
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[name] = {
            t
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for t in _targets(name, is_pkg, node, known)
        }
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:  # noqa: C901 (one algorithm)
    """The strongly connected components of more than one module (Tarjan, iterative), each
    sorted; every import circle lies inside one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _package(module: str) -> str:
    """Top-level package (or module) of ours that ``module`` belongs to ("" for the root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _pass_of(module: str) -> str | None:
    """The pass subpackage of ``analysis`` holding ``module``, or None."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "analysis" and parts[2] in PASSES:
        return parts[2]
    return None


def upward_analysis_imports(graph: Mapping[str, set[str]]) -> list[str]:
    """``root -> pass`` arrows inside ``analysis`` (the modules above the passes left out)."""
    out = []
    for module, targets in graph.items():
        if _package(module) != "analysis" or _pass_of(module) or module in TOP_OF_ANALYSIS:
            continue
        out += [f"{module} -> {t}" for t in sorted(targets) if _pass_of(t)]
    return sorted(out)


def layer_violations(graph: Mapping[str, set[str]]) -> list[str]:
    """Arrows from a package to one of the same or a higher layer (other than itself)."""
    out = []
    for module, targets in graph.items():
        a = _package(module)
        for t in sorted(targets):
            b = _package(t)
            if a != b and LAYERS[b] >= LAYERS[a]:
                out.append(f"{module} -> {t}")
    return sorted(out)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_the_graph_is_read(graph: dict[str, set[str]]) -> None:
    # the parse itself: known arrows, relative and function-level imports resolved
    assert "traceforensics.analysis.context" in graph["traceforensics.analysis.pipeline"]
    assert "traceforensics.model.session" in graph["traceforensics.analysis.context"]
    assert len(graph) > 150


def test_every_top_level_package_has_a_layer(graph: dict[str, set[str]]) -> None:
    assert sorted({_package(m) for m in graph} - set(LAYERS)) == []


def test_no_import_circles(graph: dict[str, set[str]]) -> None:
    found = cycles(graph)
    new = [c for c in found if not set(c) & set(OPEN_CYCLES)]
    assert new == []
    fixed = [m for m in OPEN_CYCLES if not any(m in c for c in found)]
    assert fixed == []  # fixed: remove its OPEN_CYCLES entry


def test_analysis_root_never_imports_a_pass(graph: dict[str, set[str]]) -> None:
    found = upward_analysis_imports(graph)
    assert sorted(set(found) - OPEN_ROOT_IMPORTS) == []
    assert sorted(OPEN_ROOT_IMPORTS - set(found)) == []  # fixed: remove its entry


def test_packages_import_downwards_only(graph: dict[str, set[str]]) -> None:
    found = layer_violations(graph)
    assert sorted(set(found) - set(OPEN_LAYER_VIOLATIONS)) == []
    assert sorted(set(OPEN_LAYER_VIOLATIONS) - set(found)) == []  # fixed: remove its entry


def test_the_checks_can_fail(tmp_path: Path) -> None:
    # a circle, an arrow up inside analysis and one up across packages are each found
    g = {
        "traceforensics.analysis.context": {"traceforensics.analysis.idle.gaps"},
        "traceforensics.analysis.idle.gaps": {"traceforensics.analysis.context"},
        "traceforensics.model.session": {"traceforensics.report.html"},
        "traceforensics.report.html": set(),
    }
    assert cycles(g) == [["traceforensics.analysis.context", "traceforensics.analysis.idle.gaps"]]
    assert upward_analysis_imports(g) == [
        "traceforensics.analysis.context -> traceforensics.analysis.idle.gaps"
    ]
    assert layer_violations(g) == ["traceforensics.model.session -> traceforensics.report.html"]
    # relative and function-level imports resolve to modules
    known = {"traceforensics.analysis.idle", "traceforensics.analysis.idle.gaps"}
    code = "def f():\n    from .gaps import IdleAnalysis\n    from . import gaps\n"
    nodes = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.ImportFrom)]
    found = {
        t for n in nodes for t in _targets("traceforensics.analysis.idle.windows", False, n, known)
    }
    assert found == {"traceforensics.analysis.idle.gaps"}
