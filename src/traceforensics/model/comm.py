"""Which GPU kernels are communication, and of which kind: the one rule every ingester and the
multi-rank analysis apply to kernel names (and to the names of the ops that launch them).

A kernel is communication (``is_comm``) when its name, after the intra-block reduction helpers
that ``NOT_COMM_KERNEL_RE`` finds are blanked out, matches one pattern of ``COMM_PATTERNS``
(case-insensitive); ``COMM_KERNEL_RE`` is their union. Every pattern is a plain string that
Python's ``re`` and polars' ``str.contains`` / ``str.replace_all`` (Rust regex: no look-around,
no back-references) read the same way, so the Kineto reader (per name, in Python), the nsys
reader (per name, in polars) and the analysis agree.

Kinds (``COMM_KINDS``): ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``,
``reduce``, ``all_to_all``, ``send_recv`` (point-to-point) and ``custom`` (communication whose
collective the name does not say). A kernel's kind is its first matching pattern's: a fixed
kind, or ``WORD``: the collective word in the name (``KIND_WORDS``, first match in that order),
else ``custom``.

The table (family: pattern -> kind; examples of each are in ``CommPattern.examples``):

=================  =============================================  ===========================
family             pattern (case-insensitive)                     kind
=================  =============================================  ===========================
nccl               ``nccl`` at a word start: ``ncclKernel_*``,    its op word: ``AllReduce``,
                   ``ncclDevKernel_*``, ``void ncclKernel<...>``  ``SendRecv``..., else custom
                   (RCCL keeps these names on ROCm)
rccl               ``rccl`` at a word start                       op word, else custom
mscclpp            ``mscclpp`` (MSCCL++)                          op word, else custom
msccl              ``msccl`` at a word start (MSCCL)              op word, else custom
deep_ep            ``deep_ep::`` / ``dpsk::ep::`` +               all_to_all
                   ``intranode|internode[_ll]::dispatch|combine``
deep_ep            ``deep_ep::`` / ``dpsk::ep::`` +               custom (notify_dispatch,
                   ``intranode|internode`` (anything else)        cached_notify, barrier...)
nvshmem            ``nvshmem`` at a word start                    op word, else custom
multimem           ``multimem`` at a word start (NVLink SHARP,    op word, else custom
                   PyTorch symmetric memory)
custom_all_reduce  ``cross_device_reduce`` (vLLM / SGLang)        all_reduce
collective_word    a collective word at a word start:             its word
                   ``all_reduce``, ``allreduce_fusion``,
                   ``one_shot_all_reduce``, ``custom_all_reduce``,
                   ``all_gather``, ``reduce_scatter``,
                   ``all_to_all``/``all2all``
collective_word    the same word as a camel-case part:            its word
                   ``oneShotAllReduce``, ``twoShotAllReduce``
                   (TensorRT-LLM), ``moeAllToAll``
=================  =============================================  ===========================

Not communication: reductions inside one GPU (``at::native::reduce_kernel``,
``cub::DeviceReduceKernel``, ``splitKreduce_kernel``) hold no collective word; warp/block-level
``all-reduce`` helpers (``warp_all_reduce``, ``blockAllReduce``...) are collective only across
the threads of one block, so ``NOT_COMM_KERNEL_RE`` blanks them out before the match;
``deep_ep::layout::*`` only counts tokens locally. The word-start condition keeps identifiers
such as ``call_reduce`` or ``smallgather`` out; a collective word inside a longer unrelated
identifier may still match, which is accepted.

Launching ops (``op_kind``): PyTorch names the op that launches a collective kernel
(``nccl:all_to_all`` under ``record_param_comms`` under ``c10d::alltoall_base_``; NCCL's NVTX
``ncclAllReduce``; ``vllm::all_reduce``...). ``OP_KIND_WORDS`` reads a kind from such a name;
the analysis prefers it to the kernel's, because NCCL runs an all-to-all as ``SendRecv``
kernels and older NCCL names other collectives' kernels ``SendRecv`` too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

#: Communication kinds, in the order reports list them.
COMM_KINDS: Final = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "all_to_all",
    "send_recv",
    "custom",
)
#: The point-to-point kind: two ranks take part, never all of a group.
POINT_TO_POINT: Final = "send_recv"
#: A pattern whose kind is read from the collective word in the name (``KIND_WORDS``).
WORD: Final = "word"

#: Collective words in kernel names -> kind; the first match wins (so ``ReduceScatter`` is not
#: read as ``reduce``). No match: ``custom``.
KIND_WORDS: Final = (
    ("all_to_all", r"all_?to_?all|all_?2_?all"),
    ("reduce_scatter", r"reduce_?scatter"),
    ("all_gather", r"all_?gather"),
    ("all_reduce", r"all_?reduce"),
    ("broadcast", r"broadcast|bcast"),
    ("send_recv", r"send_?recv|(?-i:Send|Recv)|(?:^|[^a-z])(?:send|recv)(?:[^a-z]|$)"),
    ("reduce", r"reduce"),
)
#: Collective words in the names of launching ops (``nccl:all_to_all``, ``c10d::send``,
#: ``ncclRecv``...) -> kind; stricter than ``KIND_WORDS`` for ``reduce`` and send/recv, which
#: count only after a communication prefix (a user range ``reduce_loss`` says nothing).
OP_KIND_WORDS: Final = (
    ("all_to_all", r"all_?to_?all|all_?2_?all"),
    ("reduce_scatter", r"reduce_?scatter"),
    ("all_gather", r"all_?gather"),
    ("all_reduce", r"all_?reduce"),
    ("broadcast", r"broadcast"),
    ("send_recv", r"(?:nccl:?|c10d::|rccl:?)_?i?(?:send|recv)|batch_isend_irecv"),
    ("reduce", r"(?:nccl:?|c10d::|rccl:?)_?reduce"),
)

#: Collective words, spelled with or without ``_`` (``allreduce``, ``all_reduce``...).
_WORDS: Final = r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|all_?2_?all"
_DEEP_EP: Final = r"(?:deep_ep|dpsk::ep)::(?:intra|inter)node"


@dataclass(frozen=True)
class CommPattern:
    """One row of the table (module docstring): ``regex`` (case-insensitive, Rust-regex
    compatible) -> ``kind`` (a ``COMM_KINDS`` value or ``WORD``), with real names it covers
    and the kind each has."""

    family: str
    regex: str
    kind: str
    examples: tuple[tuple[str, str], ...]


#: The table of communication kernel names, first match first (module docstring).
COMM_PATTERNS: Final = (
    CommPattern(
        "nccl",
        r"(?:^|[^a-z0-9])nccl",
        WORD,
        (
            (
                "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
                "all_reduce",
            ),
            ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all_gather"),
            (
                "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                "reduce_scatter",
            ),
            (
                "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
                "broadcast",
            ),
            (
                "ncclKernel_Reduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
                "reduce",
            ),
            ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", "send_recv"),
            ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "send_recv"),
            (
                "ncclKernel_AllToAllPivot_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long)",
                "all_to_all",
            ),
            ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", "custom"),
            (
                "void ncclKernel<(ncclFuncId)3, (ncclProtocol)0>(ncclDevComm*, ncclWork*)",
                "custom",
            ),
        ),
    ),
    CommPattern("rccl", r"(?:^|[^a-z0-9])rccl", WORD, (("rcclGenericKernel<1, false>", "custom"),)),
    CommPattern(
        "mscclpp",
        r"mscclpp",
        WORD,
        (
            (
                "void mscclpp::allreduce8<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*)",
                "all_reduce",
            ),
            (
                "void mscclpp::allgather6<false>(void*, mscclpp::MemoryChannel*)",
                "all_gather",
            ),
        ),
    ),
    CommPattern(
        "msccl",
        r"(?:^|[^a-z0-9])msccl",
        WORD,
        (("mscclKernel_Sum_float_LL128(int, int, mscclAlgo*, mscclWork*)", "custom"),),
    ),
    CommPattern(
        "deep_ep",
        _DEEP_EP + r"(?:_ll)?::(?:dispatch|combine)",
        "all_to_all",
        (
            (
                "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*)",
                "all_to_all",
            ),
            (
                "void deep_ep::internode::combine<true, 4, 8, 24, 128>(int4*, float*, bool*)",
                "all_to_all",
            ),
            (
                "void deep_ep::internode_ll::dispatch<true, 3, 7168>(void*, float*, int*, long*)",
                "all_to_all",
            ),
            (
                "void dpsk::ep::internode::dispatch<true, 8, 24, 128>(int4*, float*, int*, long*)",
                "all_to_all",
            ),
            (
                "void dpsk::ep::internode::combine<true, 8, 24, 128>(int4*, float*, bool*)",
                "all_to_all",
            ),
        ),
    ),
    CommPattern(
        "deep_ep",
        _DEEP_EP,
        "custom",
        (
            (
                "void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, int*, int)",
                "custom",
            ),
            (
                "void dpsk::ep::internode::cached_notify<8>(int, int, int, int, int, int*, int*)",
                "custom",
            ),
            (
                "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int, int const*)",
                "custom",
            ),
            (
                "void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int, int, int)",
                "custom",
            ),
        ),
    ),
    CommPattern(
        "nvshmem",
        r"(?:^|[^a-z0-9])nvshmem",
        WORD,
        (
            ("nvshmemx_barrier_all_on_stream_kernel", "custom"),
            (
                "void nvshmemi_alltoall_kernel<float>(int, float*, float const*, unsigned long)",
                "all_to_all",
            ),
        ),
    ),
    CommPattern(
        "multimem",
        r"(?:^|[^a-z0-9])multimem",
        WORD,
        (
            (
                "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>("
                "c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)",
                "all_reduce",
            ),
            ("multimem_all_gather_kernel", "all_gather"),
        ),
    ),
    CommPattern(
        "custom_all_reduce",
        r"cross_device_reduce",
        "all_reduce",
        (
            (
                "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, "
                "vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
                "all_reduce",
            ),
            (
                "void sglang::cross_device_reduce_2stage<half, 8>(sglang::RankData*, "
                "sglang::RankSignals, sglang::Signal*, half*, int, int)",
                "all_reduce",
            ),
        ),
    ),
    CommPattern(
        "collective_word",
        rf"(?:^|[^a-z])(?:{_WORDS})",
        WORD,
        (
            (
                "void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 8, 8>(float**)",
                "all_reduce",
            ),
            (
                "void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport"
                "<(tensorrt_llm::kernels::AllReduceFusionPattern)0, __nv_bfloat16, 8, true>",
                "all_reduce",
            ),
            ("void vllm::custom_all_reduce_kernel<half>(half*)", "all_reduce"),
            ("custom_reduce_scatter_kernel", "reduce_scatter"),
            ("all_gather_kernel", "all_gather"),
            ("void vllm::all2all_kernel<float>(float*)", "all_to_all"),
        ),
    ),
    CommPattern(
        "collective_word",
        # a case-sensitive lower->upper step, the rest case-insensitive
        r"(?-i:[a-z]A)ll_?(?:reduce|gather|to_?all|2_?all)|(?-i:[a-z]R)educe_?scatter",
        WORD,
        (
            (
                "void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8, 8>"
                "(tensorrt_llm::kernels::ReduceParams)",
                "all_reduce",
            ),
            (
                "void tensorrt_llm::kernels::twoShotAllReduceKernel<float, 4, 8>(float*)",
                "all_reduce",
            ),
            ("moeAllToAllKernel", "all_to_all"),
            ("fusedReduceScatterKernel", "reduce_scatter"),
        ),
    ),
)

#: Kernel names of communication: the union of ``COMM_PATTERNS``.
COMM_KERNEL_RE: Final = "(?i)" + "|".join(f"(?:{p.regex})" for p in COMM_PATTERNS)
#: Warp/block-level all-reduce helpers (collective over threads, not devices); blanked out of a
#: name before ``COMM_KERNEL_RE`` is applied.
NOT_COMM_KERNEL_RE: Final = r"(?i)(?:warp|block|cta|wave|thread)_?all_?reduce"

_COMM = re.compile(COMM_KERNEL_RE)
_NOT_COMM = re.compile(NOT_COMM_KERNEL_RE)
_PATTERNS = [(p, re.compile("(?i)" + p.regex)) for p in COMM_PATTERNS]
_KIND_WORDS = [(k, re.compile("(?i)" + w)) for k, w in KIND_WORDS]
_OP_KIND_WORDS = [(k, re.compile("(?i)" + w)) for k, w in OP_KIND_WORDS]


def is_comm_kernel(name: str) -> bool:
    """Whether a GPU kernel name is communication (module docstring: the rule and why)."""
    return _COMM.search(_NOT_COMM.sub(" ", name)) is not None


def comm_pattern(name: str) -> CommPattern | None:
    """The first ``COMM_PATTERNS`` row a kernel name matches (None: not communication)."""
    plain = _NOT_COMM.sub(" ", name)
    return next((p for p, rx in _PATTERNS if rx.search(plain)), None)


def comm_kind(name: str) -> str | None:
    """A kernel name's communication kind (``COMM_KINDS``), None when it is not
    communication (module docstring)."""
    found = comm_pattern(name)
    if found is None:
        return None
    if found.kind != WORD:
        return found.kind
    plain = _NOT_COMM.sub(" ", name)
    return next((k for k, rx in _KIND_WORDS if rx.search(plain)), "custom")


def op_kind(name: str) -> str | None:
    """The collective kind a launching op's name states (``OP_KIND_WORDS``), else None."""
    return next((k for k, rx in _OP_KIND_WORDS if rx.search(name)), None)
