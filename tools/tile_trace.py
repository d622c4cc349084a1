"""Make a big Kineto trace from a real one by tiling it in time (issue 12): scale is tested on
real event mixes, not on synthetic ones.

Usage::

    python tools/tile_trace.py IN.json[.gz] OUT.json[.gz] --copies N [--gap-us US]

Copy ``k`` (0-based) of every event is shifted by ``k * (span + gap)``, where ``span`` is the
trace's first event start to last event end; the ids that tie events together are made unique
per copy (``k * (largest id + 1)`` is added): CUPTI ``correlation``, ``External id``,
``Record function id``, ``Ev Idx``, ``Python id``/``Python parent id`` and flow ``id``s, and step
ranges are renumbered (``ProfilerStep#N`` -> ``ProfilerStep#(N + k * (last step + 1))``).
Metadata events (``ph: M``) are written once. Times are shifted in exact decimal arithmetic
(``float(Decimal(repr(ts)) + shift)``), so each ``ts`` reads back as its original ns plus the
shift, and the busy time of an N-copy trace is exactly N times the original's.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

ID_ARGS = ("correlation", "External id", "Record function id", "Ev Idx", "Python id",
           "Python parent id")  # fmt: skip
STEP_RE = re.compile(r"^(ProfilerStep#)(\d+)$")


def _read(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = json.loads(data)
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    return dict(doc)


def _num(v: Any) -> Decimal | None:
    return Decimal(repr(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _extent(events: list[dict[str, Any]]) -> tuple[Decimal, Decimal, int, int]:
    """(first start, last end) in µs, the largest id and the largest step number."""
    lo: Decimal | None = None
    hi: Decimal | None = None
    top_id = top_step = 0
    for e in events:
        ts = _num(e.get("ts"))
        if ts is None or e.get("ph") == "M":
            continue
        end = ts + (_num(e.get("dur")) or 0)
        lo = ts if lo is None else min(lo, ts)
        hi = end if hi is None else max(hi, end)
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        for key in ID_ARGS:
            if isinstance(args.get(key), int):
                top_id = max(top_id, args[key])
        if e.get("ph") in ("s", "f", "t") and isinstance(e.get("id"), int):
            top_id = max(top_id, e["id"])
        m = STEP_RE.match(str(e.get("name", "")))
        if m:
            top_step = max(top_step, int(m.group(2)))
    return lo or Decimal(0), hi or Decimal(0), top_id, top_step


def _copy(e: dict[str, Any], shift: Decimal, id_add: int, step_add: int) -> dict[str, Any]:
    out = dict(e)
    ts = _num(e.get("ts"))
    if ts is not None:
        out["ts"] = (
            float(ts + shift) if isinstance(e["ts"], float) or shift % 1 else int(ts + shift)
        )
    args = e.get("args")
    if isinstance(args, dict) and id_add:
        new = dict(args)
        for key in ID_ARGS:
            if isinstance(new.get(key), int) and new[key] >= 0:
                new[key] += id_add
        out["args"] = new
    if id_add and e.get("ph") in ("s", "f", "t") and isinstance(e.get("id"), int):
        out["id"] += id_add
    m = STEP_RE.match(str(e.get("name", "")))
    if m and step_add:
        out["name"] = f"{m.group(1)}{int(m.group(2)) + step_add}"
    return out


def tile(doc: dict[str, Any], copies: int, gap_us: Decimal = Decimal(100)) -> dict[str, Any]:
    """``doc`` with its events tiled ``copies`` times in time (see the module docstring)."""
    events = [e for e in doc.get("traceEvents", []) if isinstance(e, dict)]
    lo, hi, top_id, top_step = _extent(events)
    period = hi - lo + gap_us
    out: list[dict[str, Any]] = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M"]
    for k in range(copies):
        shift, id_add, step_add = period * k, k * (top_id + 1), k * (top_step + 1)
        out += [_copy(e, shift, id_add, step_add) for e in timed]
    return {**doc, "traceEvents": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("--copies", type=int, required=True)
    ap.add_argument("--gap-us", type=str, default="100")
    a = ap.parse_args()
    text = json.dumps(tile(_read(a.src), a.copies, Decimal(a.gap_us)), separators=(",", ":"))
    if a.dst.name.endswith(".gz"):
        with gzip.open(a.dst, "wt", compresslevel=1) as fh:
            fh.write(text)
    else:
        a.dst.write_text(text)


if __name__ == "__main__":
    main()
