"""The step detector: which ranges are training steps, and each step's window on each device.

Step sources, first that yields steps wins (per rank):
1. GPU-side step annotations (Kineto ``gpu_user_annotation`` ``ProfilerStep#N``, or a user
   range named like a step): their span on the device is recorded directly. Each *instance* of
   the range is one step, whatever its name: Kineto writes one GPU span per (host range,
   stream), so the spans of one instance share the host range's External id; without the id, a
   name the host records once is one instance, and a name it repeats (``decode_step`` x 20)
   gives one step per host range (the last one opened before the span starts). So 20
   ``decode_step`` ranges are 20 steps in Kineto as in nsys (where source 2 reads them).
2. Host ranges (annotation/cpu_op) named ``ProfilerStep#N`` — or matching the user's step
   pattern — else NVTX/user ranges named like steps or iterations (``GENERIC_STEP_RE``). Their
   device-side span is from the first to the last GPU work launched (same rank and pid) while
   the range was open.

Step windows on a device (``StepOptions.window``)::

    GPU work:   |==step 1==|....idle....|==step 2==|..|==step 3==|
    annotation: [  step 1  )            [  step 2  )  [  step 3  )
    tiled:      [  step 1  )[          step 2      )[    step 3  )

"tiled" (default): a step runs from the previous step's last GPU work to its own last GPU work,
so the idle before a step's first GPU work (its data loading, its host prologue) is charged to
that step; "annotation" uses the device-side spans as they are. The step ``number`` is the
name's last integer (``ProfilerStep#7`` -> 7), else the step's row in the table.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from traceforensics.analysis.names import matching

#: PyTorch Profiler's step ranges.
STEP_MARKER_RE: Final = r"^ProfilerStep#\d+$"
#: NVTX/user ranges named like a step or iteration: "step 3", "train_step", "Warm-up Step 1",
#: "iteration_10" (not "Optimizer.step#SGD.step": the word must follow a space, _, #, : or -).
GENERIC_STEP_RE: Final = r"(?i)(^|[\s_#:-])(step|iteration|iter)([\s_#:-]*\d+)?$"

#: Columns of the step table in the context (times in ns, trace clock).
STEP_SCHEMA: Final[dict[str, pl.DataType]] = {
    "rank": pl.Int32(),
    "device": pl.Int32(),
    "dev": pl.Int64(),
    "name": pl.String(),
    "number": pl.Int64(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "source": pl.String(),
}
_SPAN_COLS = ["rank", "device", "name", "start_ns", "end_ns", "source"]


def detect_steps(
    ranges: pl.DataFrame,
    launched: pl.LazyFrame,
    devices: pl.DataFrame,
    pattern: str | None,
    window: str,
) -> pl.DataFrame:
    """The step table (``STEP_SCHEMA``), sorted by (dev, start).

    ``ranges``: the gpu_annotation, annotation and cpu_op rows (``kind, rank, device, pid,
    name, start_ns, end_ns``); ``launched``: a query of the GPU ops with a known launch call
    (``rank, device, l_pid, launch_start_ns, start_ns, end_ns``), collected (sorted by
    ``launch_start_ns``) only when host step ranges need it; ``devices``: ``rank, device,
    dev``.
    """
    spans = _device_spans(ranges, launched, pattern)
    if spans.height == 0:
        return pl.DataFrame(schema=STEP_SCHEMA)
    spans = spans.join(devices, on=["rank", "device"]).sort("dev", "start_ns")
    if window == "tiled":
        spans = spans.with_columns(
            pl.col("end_ns").shift(1).over("dev").fill_null(pl.col("start_ns")).alias("start_ns")
        )
    spans = spans.with_columns(pl.max_horizontal("start_ns", "end_ns").alias("end_ns"))
    return (
        spans.with_row_index("_row")
        .with_columns(
            pl.coalesce(step_number(pl.col("name")), pl.col("_row").cast(pl.Int64)).alias("number")
        )
        .select(list(STEP_SCHEMA))
        .cast(STEP_SCHEMA)  # type: ignore[arg-type]
    )


def step_patterns(pattern: str | None) -> list[tuple[str, str]]:
    """The step-range patterns, in the order tried, each with its source name: the user's
    pattern alone when given (``user_pattern``), else ``ProfilerStep#N`` ranges
    (``profiler_step``), then ranges named like steps (``step_ranges``)."""
    if pattern:
        return [(pattern, "user_pattern")]
    return [(STEP_MARKER_RE, "profiler_step"), (GENERIC_STEP_RE, "step_ranges")]


def first_step_ranges(ranges: pl.DataFrame, pattern: str | None) -> pl.DataFrame:
    """The step ranges of each rank: the rows of ``ranges`` (with ``rank`` and ``name``) named
    by the first of ``step_patterns(pattern)`` that names any row of that rank, in pattern
    order, with ``source`` (the pattern's source name). A rank with none has no row."""
    parts: list[pl.DataFrame] = []
    done: list[int] = []
    for pat, source in step_patterns(pattern):
        found = ranges.filter(matching(ranges, pat) & ~pl.col("rank").is_in(done))
        parts.append(found.with_columns(pl.lit(source).alias("source")))
        done += found.get_column("rank").unique().to_list()
    return pl.concat(parts)


def step_number(name: pl.Expr) -> pl.Expr:
    """A step's number: the last integer in its name (``ProfilerStep#7`` -> 7); null when the
    name has none."""
    return name.str.extract_all(r"\d+").list.last().cast(pl.Int64, strict=False)


def _device_spans(
    ranges: pl.DataFrame, launched_q: pl.LazyFrame, pattern: str | None
) -> pl.DataFrame:
    """Device-side step spans per source, first source that yields steps per rank."""
    # per rank the first pattern that yields device steps (not merely ranges: a rank whose
    # ``ProfilerStep`` ranges launched nothing tries the generic names next)
    patterns = [pat for pat, _source in step_patterns(pattern)]
    out: list[pl.DataFrame] = []
    done: set[int] = set()
    launched: pl.DataFrame | None = None
    # only ranks with launched GPU work or GPU step annotations can get steps
    ranks = launched_q.select(pl.col("rank").unique()).collect(engine="in-memory")
    possible = set(ranks.get_column("rank").to_list()) | set(
        ranges.filter(pl.col("kind") == "gpu_annotation").get_column("rank").unique().to_list()
    )
    for pat in patterns:
        if possible <= done:
            break
        named = ranges.filter(matching(ranges, pat)).with_columns(pl.col("name").cast(pl.String))
        gpu = _gpu_instances(
            named.filter(
                (pl.col("kind") == "gpu_annotation")
                & pl.col("device").is_not_null()
                & ~pl.col("rank").is_in(list(done))
            ),
            named.filter(pl.col("kind").is_in(["annotation", "cpu_op"])),
        )
        done |= set(gpu.get_column("rank").to_list())
        host = named.filter(
            pl.col("kind").is_in(["annotation", "cpu_op"]) & ~pl.col("rank").is_in(list(done))
        )
        if launched is None and host.height:
            launched = launched_q.sort("launch_start_ns").collect(engine="in-memory")
        mapped = _host_steps_on_device(host, launched)
        done |= set(mapped.get_column("rank").to_list())
        out.extend(f.select(_SPAN_COLS) for f in (gpu, mapped) if f.height)
    if not out:
        return pl.DataFrame(schema={c: STEP_SCHEMA[c] for c in _SPAN_COLS})
    return pl.concat([f.cast({"rank": pl.Int32, "device": pl.Int32}) for f in out])


def _gpu_instances(gpu: pl.DataFrame, host: pl.DataFrame) -> pl.DataFrame:
    """One device span per instance of a GPU step annotation (``_SPAN_COLS``).

    Kineto writes one ``gpu_user_annotation`` per (host range, stream): the rows of one
    instance share the host range's External id, so an instance is (rank, device, name,
    External id) where the id is known. Without it, a name the host records once
    (``ProfilerStep#7``) is one instance per device; a name the host repeats (``decode_step``
    x 20) belongs to the last host range of that name that opened before the span starts (GPU
    work never starts before its launch, so each stream's span of iteration k is in range k).
    """
    if gpu.height == 0:
        return pl.DataFrame(schema={c: STEP_SCHEMA[c] for c in _SPAN_COLS})
    ext = pl.col("external_id") if "external_id" in gpu.columns else pl.lit(None, pl.Int64)
    opened = (
        host.select("rank", pl.col("name").cast(pl.String), pl.col("start_ns").alias("h_start"))
        .with_columns(pl.len().over("rank", "name").alias("h_count"))
        .filter(pl.col("h_count") > 1)
        .sort("h_start")
        .with_row_index("h_row")
        .select("rank", "name", "h_start", pl.col("h_row").cast(pl.Int64))
    )
    rows = (
        gpu.select(
            "rank",
            "device",
            pl.col("name").cast(pl.String),
            "start_ns",
            "end_ns",
            ext.cast(pl.Int64).alias("ext"),
        )
        .cast({"rank": opened.schema["rank"]})
        .sort("start_ns")
        .join_asof(
            opened,
            left_on="start_ns",
            right_on="h_start",
            by=["rank", "name"],
            strategy="backward",
            check_sortedness=False,
        )
    )
    # External id first; else the host range of a repeated name (-1 - row: never an id); else 0
    inst = pl.coalesce("ext", -1 - pl.col("h_row"), pl.lit(0, pl.Int64))
    return (
        rows.with_columns(inst.alias("inst"))
        .group_by("rank", "device", "name", "inst")
        .agg(pl.col("start_ns").min(), pl.col("end_ns").max())
        .with_columns(pl.lit("gpu_annotation").alias("source"))
        .select(_SPAN_COLS)
    )


def _host_steps_on_device(host: pl.DataFrame, launched: pl.DataFrame | None) -> pl.DataFrame:
    """Map host step ranges to the device span of the GPU work launched inside them."""
    empty = pl.DataFrame(schema={c: STEP_SCHEMA[c] for c in _SPAN_COLS})
    if host.height == 0 or launched is None or launched.height == 0:
        return empty
    steps = (
        host.select(
            "rank",
            pl.col("pid").fill_null(-1).alias("l_pid"),
            pl.col("name").cast(pl.String).alias("step"),
            pl.col("start_ns").alias("s_start"),
            pl.col("end_ns").alias("s_end"),
        )
        .with_row_index("step_row")
        .sort("s_start")
    )
    j = launched.join_asof(
        steps,
        left_on="launch_start_ns",
        right_on="s_start",
        by=["rank", "l_pid"],
        strategy="backward",
        check_sortedness=False,
    ).filter(pl.col("s_end").is_not_null() & (pl.col("launch_start_ns") < pl.col("s_end")))
    return (
        j.group_by("rank", "device", "step_row", "step")
        .agg(pl.col("start_ns").min(), pl.col("end_ns").max())
        .select(
            "rank",
            "device",
            pl.col("step").alias("name"),
            "start_ns",
            "end_ns",
            pl.lit("host_range").alias("source"),
        )
    )
