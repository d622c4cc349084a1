"""The table of communication kernel name patterns (``model.comm.COMM_PATTERNS``, issue 44):
every pattern's examples are communication of the stated kind and family, in Python and in
polars alike; launching op names state their kind; DeepEP-named kernels count as
communication in both ingesters (busy time of kind ``communication``, an
``exposed_communication`` finding)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from synth import SynthTrace
from traceforensics.analysis.pipeline import analyze
from traceforensics.analysis.ranks import kinds
from traceforensics.ingest import load_path
from traceforensics.model import comm

CASES = [
    (i, p.family, name, kind) for i, p in enumerate(comm.COMM_PATTERNS) for name, kind in p.examples
]


@pytest.mark.parametrize("index", range(len(comm.COMM_PATTERNS)))
def test_every_pattern_has_examples_of_its_kind(index: int) -> None:
    p = comm.COMM_PATTERNS[index]
    assert p.examples, p.family
    assert p.kind == comm.WORD or p.kind in comm.COMM_KINDS
    # the examples are found by this row, not an earlier one
    assert all(comm.comm_pattern(name) is p for name, _ in p.examples), p.family


@pytest.mark.parametrize(
    ("index", "family", "name", "kind"), CASES, ids=[f"{c[1]}-{c[3]}-{c[0]}" for c in CASES]
)
def test_pattern_example_is_comm_of_its_kind(index: int, family: str, name: str, kind: str) -> None:
    assert comm.is_comm_kernel(name)
    assert comm.comm_kind(name) == kind
    # the nsys reader's form (polars, Rust regex) says the same
    frame = pl.DataFrame({"name": [name]}).select(
        pl.col("name")
        .str.replace_all(comm.NOT_COMM_KERNEL_RE, " ")
        .str.contains(comm.COMM_KERNEL_RE)
        .alias("is_comm"),
        kinds.comm_kind_expr(pl.col("name")).alias("kind"),
        kinds.comm_family_expr(pl.col("name")).alias("family"),
    )
    assert frame.row(0) == (True, kind, family)


@pytest.mark.parametrize(
    "name",
    [
        "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*)",
        "void at::native::reduce_kernel<512, 1>(at::native::ReduceOp<float>)",
        "void rms_norm_kernel<float, warp_all_reduce<float>>(float*)",
        "call_reduce_kernel",
    ],
)
def test_not_comm_has_no_kind(name: str) -> None:
    assert comm.comm_kind(name) is None
    assert pl.select(kinds.comm_kind_expr(pl.lit(name))).item() is None


OPS = [
    ("nccl:all_to_all", "all_to_all"),
    ("c10d::alltoall_base_", "all_to_all"),
    ("## all2all_data:kjt lengths ##", "all_to_all"),
    ("nccl:_all_gather_base", "all_gather"),
    ("c10d::_allgather_base_", "all_gather"),
    ("c10d::reduce_scatter_tensor_coalesced_", "reduce_scatter"),
    ("nccl:all_reduce", "all_reduce"),
    ("ncclAllReduce", "all_reduce"),
    ("symm_mem::multimem_all_reduce_", "all_reduce"),
    ("nccl:broadcast", "broadcast"),
    ("nccl:reduce", "reduce"),
    ("c10d::send", "send_recv"),
    ("c10d::recv_", "send_recv"),
    ("nccl:recv 1<-0", "send_recv"),
    ("ncclSend", "send_recv"),
    ("record_param_comms", None),
    ("ncclGroupEnd", None),
    ("reduce_loss", None),
    ("aten::sum", None),
]


@pytest.mark.parametrize(("name", "kind"), OPS)
def test_launching_op_states_its_kind(name: str, kind: str | None) -> None:
    assert comm.op_kind(name) == kind
    assert pl.select(kinds.op_kind_expr(pl.lit(name))).item() == kind


DEEP_EP = (
    "void dpsk::ep::internode::dispatch<true, 8, 24, 128>(int4*, float*, int*, long*)",
    "void dpsk::ep::internode::combine<true, 8, 24, 128>(int4*, float*, bool*)",
    "void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, int*, int)",
    "void dpsk::ep::internode::cached_notify<8>(int, int, int, int, int, int*, int*)",
)


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_deep_ep_kernels_are_communication(tmp_path: Path, fmt: str) -> None:
    """A MoE step: GEMMs on stream 7, DeepEP dispatch/combine on stream 20 that nothing
    overlaps: their time is communication, exposed."""
    tr = SynthTrace()
    t = 1_000_000
    for layer in range(4):
        with_name = DEEP_EP[layer % len(DEEP_EP)]
        tr.cpu_range("aten::mm", t, 40_000)
        tr.launch("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", t + 5_000, 5_000, t + 12_000,
                  300_000, stream=7)  # fmt: skip
        t += 320_000
        tr.launch(with_name, t, 5_000, t + 8_000, 500_000, stream=20)
        t += 520_000
    path = tmp_path / ("moe.json" if fmt == "kineto" else "moe.sqlite")
    if fmt == "kineto":
        tr.write_kineto(path)
    else:
        tr.write_nsys(path)
    session = load_path(path)
    kernels = session.events.filter(pl.col("kind") == "kernel")
    marked = dict(zip(kernels["name"].cast(pl.String), kernels["is_comm"], strict=True))
    assert all(marked[n] for n in DEEP_EP), marked
    result = analyze(session)
    (dev,) = result.devices
    assert dev.busy_by_kind.get("communication", 0) >= 4 * 500_000
    assert any(f.category == "exposed_communication" for f in result.findings)
