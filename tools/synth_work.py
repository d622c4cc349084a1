"""Synthetic traces whose step time follows (or ignores) the work size of each step.

``token_steps(lengths, ...)`` builds one ``synth.SynthTrace``: per step ``k`` a
``ProfilerStep#k`` range holding

- an ``aten::to`` of the token batch ``[batch, lengths[k]]`` (``long int``) that launches a
  host-to-device copy of ``batch * lengths[k] * 8`` bytes;
- an ``aten::embedding`` whose index input is that batch (``Input Dims`` ``[[vocab, dim],
  [batch, L]]``), launching one short kernel;
- a compute kernel lasting ``base_kernel_ns + ns_per_token * batch * lengths[k]`` (or
  ``base_kernel_ns`` alone when ``follows=False``), then a ``cudaDeviceSynchronize`` until it
  ends, so the step's device window lasts ``STEP_OVERHEAD_NS`` + that kernel exactly (tiled
  windows: from the previous step's last GPU work to this step's).

``shapes=False`` leaves out the ``Input Dims``/``Input type`` args (nsys then writes bare op
names), ``copies=False`` leaves out the copy, ``no_copy`` the copy of the steps it lists, and
``prefetch=True`` copies step k+1's batch during step k (a prefetching loader; the last step
copies its own length again). Written with ``write_kineto`` (args) or ``write_nsys``
(``emit_nvtx``-style ``sizes = [[...]]`` range names) the same timeline reads the same. Times
are integer ns from the trace start.

``feature_steps`` copies batches of other shapes (``[batch, L, feat]`` float features, int32
ids), ``copy_steps`` pageable copies whose time is the step's only variable part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from synth import SynthTrace

#: Host/GPU layout of one step (ns from the step's start).
TO_START_NS, TO_DUR_NS = 2_000, 20_000
EMB_START_NS = 30_000
MAIN_LAUNCH_NS = 60_000
MAIN_GPU_NS = 70_000
SYNC_TAIL_NS = 5_000
STEP_GAP_NS = 20_000
#: A step's device window lasts this plus its compute kernel (see the module docstring).
STEP_OVERHEAD_NS = MAIN_GPU_NS + STEP_GAP_NS
VOCAB, DIM = 50_257, 768


def token_steps(
    lengths: Sequence[int],
    *,
    batch: int = 8,
    ns_per_token: int = 40,
    base_kernel_ns: int = 200_000,
    follows: bool = True,
    shapes: bool = True,
    copies: bool = True,
    embedding: bool = True,
    extra_ns: Sequence[int] = (),
    micro_batches: int = 1,
    cpu_lookup: bool = False,
    bias: bool = False,
    prefetch: bool = False,
    no_copy: Sequence[int] = (),
) -> SynthTrace:
    """A trace of ``len(lengths)`` steps with token batches ``[batch, lengths[k]]``; step k's
    compute kernel lasts ``extra_ns[k]`` more (a warm-up, or noise unrelated to the data).
    Without ``embedding``, the compute kernel is launched by an ``aten::mm`` of ``[B*L, dim]``
    (the first operator with a tensor input when there is no copy either; with ``bias``, an
    ``aten::addmm`` whose first input is the bias ``[dim]``). ``micro_batches``
    token lookups per step (up to 6; gradient accumulation), then a
    position lookup ``[L]`` into its own table; ``cpu_lookup`` adds a host-only lookup of
    99,999 ids at the step's start."""
    tr = SynthTrace()
    t = 10_000
    for k, length in enumerate(lengths):
        tokens = batch * length
        kernel_ns = base_kernel_ns + (ns_per_token * tokens if follows else 0)
        kernel_ns += extra_ns[k] if k < len(extra_ns) else 0
        step_ns = MAIN_GPU_NS + kernel_ns + SYNC_TAIL_NS
        tr.cpu_range(f"ProfilerStep#{k + 1}", t, step_ns, kind="annotation")
        copied = batch * (lengths[min(k + 1, len(lengths) - 1)] if prefetch else length)
        if copies and k not in no_copy:
            to_args: dict[str, Any] = {
                "Input Dims": [[batch, copied // batch], [], [], [], [], [], [], []],
                "Input type": ["long int", "", "", "", "", "", "", ""],
            }
            tr.cpu_range("aten::to", t + TO_START_NS, TO_DUR_NS, args=to_args if shapes else {})
            tr.launch(
                "",
                t + TO_START_NS + 5_000,
                8_000,
                t + TO_START_NS + 8_000,
                5_000,
                kind="memcpy",
                api="cudaMemcpyAsync",
                copy_kind="h2d",
                src_mem="pinned",
                dst_mem="device",
                bytes=copied * 8,
            )
        if not embedding:
            dims = [[DIM]] * bias + [[tokens, DIM], [DIM, DIM]]
            mm = dims if shapes else None
            _compute(tr, t, kernel_ns, step_ns, mm)
            t += MAIN_GPU_NS + kernel_ns + STEP_GAP_NS
            continue
        lookups = [([VOCAB, DIM], [batch, length])] * micro_batches + [([1_024, DIM], [length])]
        for j, (table, index) in enumerate(lookups):
            at = t + EMB_START_NS + j * 4_000
            emb_args: dict[str, Any] = {
                "Input Dims": [table, index, [], [], []],
                "Input type": ["float", "long int", "Scalar", "Scalar", "Scalar"],
            }
            tr.cpu_range("aten::embedding", at, 3_500, args=emb_args if shapes else {})
            tr.launch("indexSelectLargeIndex", at + 500, 2_000, at + 2_600, 1_000)
        if cpu_lookup:  # a lookup on the host: no GPU work, not the device's work
            cpu_args = {"Input Dims": [[10, 4], [1, 99_999]], "Input type": ["float", "long int"]}
            tr.cpu_range("aten::embedding", t + 500, 1_000, args=cpu_args if shapes else {})
        _compute(tr, t, kernel_ns, step_ns)
        t += MAIN_GPU_NS + kernel_ns + STEP_GAP_NS
    return tr


def image_steps(
    batches: Sequence[int],
    *,
    sample: Sequence[int] = (3, 32, 32),
    ns_per_sample: int = 2_000,
    flat: int = 0,
) -> SynthTrace:
    """Steps copying a float image batch ``[batches[k], *sample]`` (plus its int64 labels
    ``[batches[k]]``, and with ``flat`` a 1-D float tensor of that many values, larger than
    the batch) to the device, then a kernel of ``ns_per_sample`` per sample."""
    tr = SynthTrace()
    t = 10_000
    for k, b in enumerate(batches):
        kernel_ns = 100_000 + ns_per_sample * b
        step_ns = MAIN_GPU_NS + kernel_ns + SYNC_TAIL_NS
        tr.cpu_range(f"ProfilerStep#{k + 1}", t, step_ns, kind="annotation")
        numel = b
        for n in sample:
            numel *= n
        tensors = [([b, *sample], "float", numel * 4), ([b], "long int", b * 8)]
        tensors += [([flat], "float", flat * 4)] if flat else []
        for j, (dims, dtype, size) in enumerate(tensors):
            at = t + TO_START_NS + j * 12_000
            args = {"Input Dims": [dims, [], [], [], []], "Input type": [dtype, "", "", "", ""]}
            tr.cpu_range("aten::to", at, 11_000, args=args)
            tr.launch(
                "", at + 2_000, 6_000, at + 5_000, 5_000, kind="memcpy", api="cudaMemcpyAsync",
                copy_kind="h2d", src_mem="pinned", dst_mem="device", bytes=size,
            )  # fmt: skip
        _compute(tr, t, kernel_ns, step_ns)
        t += MAIN_GPU_NS + kernel_ns + STEP_GAP_NS
    return tr


def feature_steps(
    lengths: Sequence[int], *, batch: int | Sequence[int] = 8, feat: int = 0,
    dtype: str = "float", itemsize: int = 4, ns_per_element: int = 20,
) -> SynthTrace:  # fmt: skip
    """Steps copying a batch ``[batch, lengths[k], feat]`` (``[batch, lengths[k]]`` when
    ``feat`` is 0; ``batch[k]`` when a sequence) of ``dtype`` (``itemsize`` bytes per element)
    to the device, then a kernel of 100 µs + ``ns_per_element`` per element: the leading dim
    is constant, the work is not."""
    tr = SynthTrace()
    t = 10_000
    for k, length in enumerate(lengths):
        b = batch if isinstance(batch, int) else batch[k]
        dims = [b, length, feat] if feat else [b, length]
        numel = b * length * (feat or 1)
        kernel_ns = 100_000 + ns_per_element * numel
        step_ns = MAIN_GPU_NS + kernel_ns + SYNC_TAIL_NS
        tr.cpu_range(f"ProfilerStep#{k + 1}", t, step_ns, kind="annotation")
        args = {"Input Dims": [dims, [], [], [], []], "Input type": [dtype, "", "", "", ""]}
        tr.cpu_range("aten::to", t + TO_START_NS, 11_000, args=args)
        tr.launch(
            "", t + TO_START_NS + 2_000, 6_000, t + TO_START_NS + 5_000, 5_000, kind="memcpy",
            api="cudaMemcpyAsync", copy_kind="h2d", src_mem="pinned", dst_mem="device",
            bytes=numel * itemsize,
        )  # fmt: skip
        _compute(tr, t, kernel_ns, step_ns)
        t += MAIN_GPU_NS + kernel_ns + STEP_GAP_NS
    return tr


def copy_steps(
    megabytes: Sequence[int], *, gb_per_s: int = 10, kernel_ns: int = 200_000,
    pinned: bool = False, hidden_ns: int = 0,
) -> SynthTrace:  # fmt: skip
    """Steps of one synchronous copy of ``megabytes[k]`` MB (10^6 bytes; its GPU time
    ``bytes / gb_per_s`` ns) from pageable (``pinned``: pinned) memory, then a compute
    kernel of constant ``kernel_ns``: the step time follows the bytes only through the
    copy's own time. ``hidden_ns``: a kernel of that constant length on another stream
    overlaps each copy from its start (the copy's exposed time is the rest)."""
    tr = SynthTrace()
    t = 10_000
    for k, mb in enumerate(megabytes):
        nbytes = mb * 1_000_000
        copy_ns = nbytes // gb_per_s
        tr.cpu_range(f"ProfilerStep#{k + 1}", t, copy_ns + kernel_ns + 100_000, kind="annotation")
        if hidden_ns:
            tr.launch("side_kernel", t + 500, 400, t + 2_000, hidden_ns, stream=9)
        tr.launch(
            "", t + 1_000, copy_ns + 2_000, t + 2_000, copy_ns, kind="memcpy", api="cudaMemcpy",
            copy_kind="h2d", src_mem="pinned" if pinned else "pageable", dst_mem="device",
            bytes=nbytes,
        )  # fmt: skip
        t2 = t + copy_ns + 10_000
        tr.launch("gemm_kernel", t2, 5_000, t2 + 10_000, kernel_ns)
        tr.api("cudaDeviceSynchronize", t2 + 6_000, kernel_ns + 10_000)
        t = t2 + kernel_ns + 30_000
    return tr


def _compute(
    tr: SynthTrace, t: int, kernel_ns: int, step_ns: int, mm: list[list[int]] | None = None
) -> None:
    """The step's compute kernel and the host's wait for it (ends the step's window); with
    ``mm``, launched inside an ``aten::mm`` of those float input dims (``aten::addmm`` with
    three: bias, input, weight)."""
    if mm is not None:
        args = {"Input Dims": mm, "Input type": ["float"] * len(mm)}
        op = "aten::addmm" if len(mm) == 3 else "aten::mm"
        tr.cpu_range(op, t + MAIN_LAUNCH_NS - 1_000, 7_000, args=args)
    tr.launch("gemm_kernel", t + MAIN_LAUNCH_NS, 5_000, t + MAIN_GPU_NS, kernel_ns)
    rest = step_ns - MAIN_LAUNCH_NS - 6_000
    tr.api("cudaDeviceSynchronize", t + MAIN_LAUNCH_NS + 6_000, rest)


def step_dur_ns(kernel_ns: int) -> int:
    """Device-window length of a (not first) step whose compute kernel lasts ``kernel_ns``."""
    return STEP_OVERHEAD_NS + kernel_ns
