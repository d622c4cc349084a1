"""Which GPU kernels are communication: the one rule every ingester applies to kernel names.

A kernel is communication (``is_comm``) when its name, after the intra-block reduction helpers
that ``NOT_COMM_KERNEL_RE`` finds are blanked out, matches ``COMM_KERNEL_RE``
(case-insensitive). Both are plain strings that Python's ``re`` and polars' ``str.contains`` /
``str.replace_all`` (Rust regex: no look-around, no back-references) read the same way, so the
Kineto reader (per name, in Python) and the nsys reader (per name, in polars) agree.

Families covered, and why each is communication:

- collective libraries, by their name prefix at a word start: NCCL (``ncclKernel_*``,
  ``ncclDevKernel_*``, demangled ``void ncclKernel<...>``), RCCL (``rccl*``; on ROCm RCCL also
  names its kernels NCCL-style), MSCCL / MSCCL++ (``mscclKernel*``, ``mscclpp::*``), NVSHMEM
  (``nvshmem*``: the library launches kernels only for collectives, barriers and peer copies)
  and ``multimem*`` (NVLink SHARP multicast loads/stores: PyTorch symmetric memory's
  ``multimem_all_reduce_kernel``);
- custom all-reduce kernels whose names carry no collective word: vLLM / SGLang
  ``cross_device_reduce_1stage`` / ``2stage``;
- DeepEP expert-parallel all-to-all: ``deep_ep::intranode::*``, ``deep_ep::internode::*`` and
  ``deep_ep::internode_ll::*`` (dispatch, combine, notify, barrier); ``deep_ep::layout::*``
  only counts tokens locally and is compute;
- any kernel whose name holds a collective word, ``all_reduce``/``allreduce``, ``all_gather``,
  ``reduce_scatter``, ``all_to_all``/``all2all`` (with or without ``_``), at a word start: after
  a non-letter (``_``, ``::``, a space, a digit) or as a camel-case part (``oneShotAllReduce``).
  This takes in c10d symmetric memory (``one_shot_all_reduce_kernel``,
  ``two_shot_all_reduce_kernel``), TensorRT-LLM (``oneShotAllReduceKernel``,
  ``twoShotAllReduceKernel``, ``ar_fusion::allreduce_fusion_kernel_oneshot_lamport``) and the
  custom collectives of other frameworks, which all name the collective they implement.

Not communication: reductions inside one GPU (``at::native::reduce_kernel``,
``cub::DeviceReduceKernel``, ``block_reduce``, ``splitKreduce_kernel``) hold no collective word;
warp/block-level ``all-reduce`` helpers (``warp_all_reduce``, ``blockAllReduce``...) are
collective only across the threads of one block, so ``NOT_COMM_KERNEL_RE`` blanks them out
before the match (a compute kernel templated on such a helper stays compute, while a real
collective kernel that also uses one still matches on its own name). The word-start condition
keeps identifiers such as ``call_reduce`` or ``smallgather`` out; a collective word inside a
longer unrelated identifier may still match, which is accepted.
"""

from __future__ import annotations

import re
from typing import Final

#: Collective words, spelled with or without ``_`` (``allreduce``, ``all_reduce``...).
_WORDS: Final = r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|all_?2_?all"

#: Kernel names of communication (see the module docstring for each family).
COMM_KERNEL_RE: Final = (
    r"(?i)"
    # library prefixes at a word start: "void ncclKernel<", "_nccl", "(anonymous)::rccl..."
    r"(?:^|[^a-z0-9])(?:nccl|rccl|msccl|nvshmem|multimem)"
    r"|cross_device_reduce"
    r"|deep_ep::(?:intra|inter)node"
    # a collective word after a non-letter: "::allreduce_fusion", "one_shot_all_reduce"
    rf"|(?:^|[^a-z])(?:{_WORDS})"
    # ... or as a camel-case part: case-sensitive lower->upper step, rest case-insensitive
    r"|(?-i:[a-z]A)ll_?(?:reduce|gather|to_?all|2_?all)"
    r"|(?-i:[a-z]R)educe_?scatter"
)
#: Warp/block-level all-reduce helpers (collective over threads, not devices); blanked out of a
#: name before ``COMM_KERNEL_RE`` is applied.
NOT_COMM_KERNEL_RE: Final = r"(?i)(?:warp|block|cta|wave|thread)_?all_?reduce"

_COMM = re.compile(COMM_KERNEL_RE)
_NOT_COMM = re.compile(NOT_COMM_KERNEL_RE)


def is_comm_kernel(name: str) -> bool:
    """Whether a GPU kernel name is communication (module docstring: the rule and why)."""
    return _COMM.search(_NOT_COMM.sub(" ", name)) is not None
