"""What every figure shares: the figure class, time units, bin labels (the bins themselves
follow analysis/utilization/bins.py), message panels for figures with nothing to draw, and
legends placed outside the data.

Figures are ``matplotlib.figure.Figure`` objects made without pyplot (``figure_class``): no
backend is switched, so a notebook's own (inline) backend stays as the user set it, and no
figure is held in pyplot's registry after its last reference goes. Each shows itself as a PNG
where a figure is a cell's last expression (``_repr_png_``), whatever the backend.

Figures are made with ``layout="constrained"`` and their legends with ``loc="outside ..."``:
the layout engine then reserves room for the legend beside the axes, so a legend can never
cover a curve or a bar, whatever the data.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any, Final

from traceforensics.model.errors import InputError
from traceforensics.model.units import NS_PER_MS, NS_PER_S, NS_PER_US

#: Figure width (inches) of every analysis figure; rows add height.
WIDTH_IN: Final = 13.0
#: Resolution of saved PNGs (dots per inch): 13 in -> 1430 px, sharp on a laptop screen.
DPI: Final = 110
NO_GPU: Final = "no GPU activity in this trace (CPU-only): nothing to draw"


_FIGURE_CLASS: list[Any] = []


def figure_class() -> Any:
    """matplotlib's ``Figure`` with a PNG display (``_repr_png_``, at ``DPI``), made on first
    use (the import costs ~0.2 s: commands that draw nothing never pay it); an ``InputError``
    that says how to install matplotlib when it is missing."""
    if not _FIGURE_CLASS:
        try:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise InputError(
                "plots need matplotlib, a dependency of traceforensics that is missing here; "
                "install it with: pip install matplotlib"
            ) from exc

        class TfFigure(Figure):  # type: ignore[misc]
            """A figure on its own Agg canvas (drawn, saved and measured without a backend
            being chosen) that a notebook shows as a PNG."""

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                FigureCanvasAgg(self)

            def _repr_png_(self) -> bytes:
                buf = io.BytesIO()
                self.savefig(buf, format="png", dpi=DPI)
                return buf.getvalue()

        _FIGURE_CLASS.append(TfFigure)
    return _FIGURE_CLASS[0]


def new_figure(rows: int, cols: int = 1, row_in: float = 3.0, **kw: Any) -> tuple[Any, Any]:
    """A constrained-layout figure with a ``rows x cols`` grid of axes (always 2-D)."""
    fig = figure_class()(figsize=(WIDTH_IN, 1.2 + row_in * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, **kw)
    return fig, axes


def message_figure(title: str, text: str) -> Any:
    """A small figure that says why there is nothing to draw (instead of an empty plot)."""
    fig, axes = new_figure(1, row_in=1.4)
    message(axes[0][0], text)
    fig.suptitle(title)
    return fig


def message(ax: Any, text: str) -> None:
    """Turn ``ax`` into a text panel: no ticks, no frame, ``text`` in the middle."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=12)


def legend_below(fig: Any, handles: Sequence[Any], ncol: int = 6) -> Any:
    """One figure legend under every axes (room reserved by the layout engine)."""
    if not handles:
        return None
    return fig.legend(
        handles=list(handles),
        loc="outside lower center",
        ncol=max(1, min(ncol, len(handles))),
        fontsize="small",
        frameon=False,
    )


def time_unit(span_ns: int) -> tuple[float, str]:
    """(ns per axis unit, unit name) so a window of ``span_ns`` reads in 0.1..2000 units."""
    if span_ns < 2 * NS_PER_MS:
        return float(NS_PER_US), "µs"
    if span_ns < 2 * NS_PER_S:
        return float(NS_PER_MS), "ms"
    return float(NS_PER_S), "s"


def fmt_bin(ns: int) -> str:
    """A 1-2-5 duration as people write it: ``500 µs``, ``2 ms``, ``1 s`` (no trailing zeros)."""
    for unit_ns, unit in ((NS_PER_S, "s"), (NS_PER_MS, "ms"), (NS_PER_US, "µs")):
        if ns >= unit_ns:
            return f"{ns / unit_ns:g} {unit}"
    return f"{ns} ns"


def device_label(rank: int, device: int, name: str = "") -> str:
    """``rank 0 GPU 1 (NVIDIA H100)``: the row title of a device."""
    return f"rank {rank} GPU {device}" + (f" ({name})" if name else "")


def short(text: str, width: int) -> str:
    """A label cut to ``width`` characters (long kernel names would squeeze the axes)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
