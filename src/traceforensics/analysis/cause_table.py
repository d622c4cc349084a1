"""The idle causes, one row per cause: every fact about a cause that is keyed by its id.

A row (``Cause``) holds the id (a contract: JSON, docs/causes.md; never renamed), its
``priority`` among the host-range classes, its colour and hatch in every figure, its glossary
text (``tf explain``), its remedy (framework-neutral, plus per-framework wording) and the
confidence of its estimate. Every consumer reads this table: ``CAUSES`` and the attribution
matrices, the classifier's order (``in_priority``), ``findings.glossary``,
``findings.remedies``, ``findings.estimates`` and ``report.palette`` (the colour is plain
data here: analysis never imports report).

Rules:

- The row order is the report order: JSON ``idle_by_cause`` keys, ties of ``ranked_causes``
  and of ``findings.results.CATEGORIES``. A new cause goes at the end.
- ``priority`` ranks the host-range classes, the smallest first (steps of 10 leave room for
  a new class between two): when classified host ranges of one thread cover the same instant,
  the class with the smallest number takes it (``analysis.host_timeline``), and a host row
  whose name matches several rules takes it too (``in_priority``: the classifier's order).
  Blocking calls (sync, copy, allocator) beat the context they run in (compilation,
  communication, data loading, I/O), which beats generic work (launch API calls, other CPU
  work). ``None``: never a host class; the cause is read from the GPU side (a stream
  dependency, pick-up latency, nothing recorded).
- ``confidence`` of the estimate ``recoverable = idle time of the cause``: ``high`` where the
  host recorded the cause itself, ``medium`` where it is read from timing, ``low`` where
  nothing explains the time (``findings.estimates``).
- ``remedy`` names no framework and no vendor API; ``remedies[framework]`` (keys:
  ``analysis.program.FRAMEWORKS``) replaces it for that framework. ``{prof}``, ``{kprof}`` and
  ``{rt}`` stand for the vendor's tools (``findings.remedies.VENDOR_WORDS``).
- Colours: the first seven causes take the Okabe-Ito colours (distinguishable with the common
  colour-vision deficiencies); later ones Paul Tol's "muted" colours with a hatch as a second
  cue, since thirteen hues cannot all stay apart for every reader; ``untraced`` is the light
  grey of "unknown". Every colour differs from every other (by hue, or by hatch).

Adding a cause: a row at the end of ``CAUSE_TABLE`` (with an id constant), the rule that
finds it (``analysis/classify.py`` for a host class), and its section in docs/causes.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Final, TypeVar

T = TypeVar("T")

DATA_LOADING: Final = "data_loading"
HOST_SYNC: Final = "host_sync"
MEMCPY: Final = "memcpy"
LAUNCH_OVERHEAD: Final = "launch_overhead"
MEMORY_MANAGEMENT: Final = "memory_management"
COMPILATION: Final = "compilation"
COMMUNICATION: Final = "communication"
IO: Final = "io"
CROSS_STREAM_WAIT: Final = "cross_stream_wait"
CPU_COMPUTE: Final = "cpu_compute"
PROFILER_OVERHEAD: Final = "profiler_overhead"
UNTRACED: Final = "untraced"
#: Queued work the GPU started after a short pick-up latency, its launch call having returned
#: before the gap began (it did not wait for a launch): ``queued.queued_cause``.
GPU_PICKUP: Final = "gpu_pickup"


@dataclass(frozen=True, slots=True)
class Cause:
    """One idle cause (the module docstring has the rules of each field)."""

    id: str
    _: KW_ONLY
    #: Rank among the host-range classes (the smallest wins); None: never a host class.
    priority: int | None
    #: Hex colour and matplotlib hatch ("" for none) in every figure and the HTML report.
    color: str
    hatch: str
    #: Confidence of the estimate: "high", "medium" or "low".
    confidence: str
    #: What the GPU or the host was doing (``tf explain``).
    meaning: str
    #: The rule, in words (details in docs/causes.md).
    detection: str
    #: What to do, framework-neutral.
    remedy: str
    #: What to do in a framework's terms, by framework id.
    remedies: Mapping[str, str] = field(default_factory=dict)


#: Every cause, in report order (module docstring).
CAUSE_TABLE: Final[tuple[Cause, ...]] = (
    Cause(
        DATA_LOADING,
        priority=70,
        color="#E69F00",  # Okabe-Ito orange
        hatch="",
        confidence="high",
        meaning="the GPU waited while the host fetched or prepared the next batch",
        detection="the launching thread was inside a data-fetch range (DataLoader __next__, "
        "names with data/batch/load/prefetch) during the gap",
        remedy="feed the GPU faster: prepare the next batch on other threads while this one "
        "computes, and double-buffer its upload",
        remedies={
            "pytorch": "feed the GPU faster: DataLoader(num_workers>0, pin_memory=True, "
            "persistent_workers=True, prefetch_factor), move decoding/augmentation off the "
            "main thread",
            "cuda": "overlap input preparation with compute: a producer thread fills "
            "cudaMallocHost buffers, double-buffered with cudaMemcpyAsync on a second stream",
            "hip": "overlap input preparation with compute: a producer thread fills "
            "hipHostMalloc buffers, double-buffered with hipMemcpyAsync on a second stream",
            "openacc": "overlap input preparation with compute: upload the next batch with "
            "update device(...) async(q) while the current compute region runs",
            "openmp": "overlap input preparation with compute: target update to(...) nowait "
            "depend(out: ...) for the next batch while the current target region runs",
            "jax": "feed the device ahead: prefetch the next batch with jax.device_put (or a "
            "tf.data/grain pipeline with prefetch) while this step runs",
            "tensorrt": "prepare the next request while the engine runs: double-buffer pinned "
            "input buffers and upload them on a second stream",
        },
    ),
    Cause(
        HOST_SYNC,
        priority=10,
        color="#D55E00",  # Okabe-Ito vermillion
        hatch="",
        confidence="high",
        meaning="the host waited for the GPU to drain (a synchronizing call), then caught up: "
        "the relaunch into the emptied queue is the sync's cost",
        detection="a synchronizing call (cudaStreamSynchronize, .item(), cudaEventSynchronize, "
        "a blocking D2H copy) returned just after the GPU went idle; in that gap, for 1 ms "
        "after it returns, the host's generic work, the launch call and the pick-up latency of "
        "the relaunched work count too",
        remedy="remove host waits from the step: read results back every N steps, wait on "
        "events instead of whole-device synchronizes",
        remedies={
            "pytorch": "remove host syncs from the step: avoid .item()/.cpu()/print of GPU "
            "tensors, torch.cuda.synchronize and blocking D2H copies; log metrics every N steps",
            "cuda": "drop cudaDeviceSynchronize/cudaStreamSynchronize and blocking cudaMemcpy "
            "from the loop: wait on a cudaEvent every N steps, cudaStreamWaitEvent between",
            "hip": "drop hipDeviceSynchronize/hipStreamSynchronize and blocking hipMemcpy from "
            "the loop: wait on a hipEvent every N steps, hipStreamWaitEvent between streams",
            "openacc": "put compute regions and updates on async(q) queues and wait(q) only "
            "when the host needs results; no update self(...) every iteration",
            "openmp": "end target regions with nowait + depend and taskwait only where the "
            "host needs results; no target update from(...) every iteration",
            "jax": "no block_until_ready, float()/np.asarray of device arrays or host "
            "callbacks (jax.debug.print) in the loop; log metrics every N steps",
            "tensorrt": "do not synchronize after every inference: record a cudaEvent per "
            "request and wait only when the output is consumed",
        },
    ),
    Cause(
        MEMCPY,
        priority=20,
        color="#56B4E9",  # Okabe-Ito sky blue
        hatch="",
        confidence="high",
        meaning="the host was blocked inside a copy call",
        detection="the launching thread was inside a pageable cudaMemcpy*/H2D staging call "
        "during the gap",
        remedy="use page-locked (pinned) host buffers and asynchronous copies on their own "
        "stream so copies overlap compute",
        remedies={
            "pytorch": "pin host buffers (pin_memory=True) and copy with non_blocking=True so "
            "copies overlap compute instead of blocking the host",
            "cuda": "allocate host buffers with cudaMallocHost (or cudaHostRegister; CUDA "
            "Fortran: pinned) and cudaMemcpyAsync on a non-default stream so copies overlap "
            "kernels",
            "hip": "allocate host buffers with hipHostMalloc (or hipHostRegister) and "
            "hipMemcpyAsync on a non-null stream so copies overlap kernels",
            "openacc": "wrap the loop in a data region (copyin/create, present on inner "
            "regions) so arrays are not copied implicitly per kernel; build with -gpu=pinned",
            "openmp": "keep data mapped across the loop (target data, or target enter/exit "
            "data) and map only what each region needs; avoid implicit tofrom maps per region",
            "jax": "keep arrays on the device between steps (jax.device_put once, "
            "donate_argnums for updated state) and put inputs ahead of use",
            "tensorrt": "pinned (cudaMallocHost) I/O buffers and cudaMemcpyAsync on the "
            "inference stream; keep inputs on the device when a GPU produced them",
        },
    ),
    Cause(
        LAUNCH_OVERHEAD,
        priority=90,
        color="#CC79A7",  # Okabe-Ito reddish purple
        hatch="",
        confidence="medium",
        meaning="the host was issuing this very work: operator dispatch and the launch API",
        detection="the time from the launching op's last child that did other work to its "
        "launch call, and the GPU's short pick-up latency (<= 50 us) after a launch call it "
        "waited for (work queued before the gap began is gpu_pickup)",
        remedy="launch fewer, larger kernels: fuse small kernels, batch work, capture the "
        "repeated step once as a graph",
        remedies={
            "pytorch": "launch fewer, larger kernels: torch.compile / fusion, CUDA graphs, "
            "fused/foreach optimizers, larger batch",
            "cuda": "launch fewer, larger kernels: fuse adjacent kernels and capture the "
            "repeated step as a CUDA graph (cudaStreamBeginCapture, cudaGraphLaunch)",
            "hip": "launch fewer, larger kernels: fuse adjacent kernels and capture the "
            "repeated step as a hipGraph (hipStreamBeginCapture, hipGraphLaunch)",
            "openacc": "fewer, larger kernels: merge adjacent loops into one parallel region, "
            "collapse(n) nested loops, async queues so launches do not wait",
            "openmp": "fewer, larger target regions: fuse loops into one target teams "
            "distribute parallel for, collapse(n), nowait so launches do not serialise",
            "jax": "jax.jit the whole step (lax.scan over micro-steps) instead of many small "
            "jitted calls or op-by-op execution",
            "tensorrt": "capture enqueueV3 into a CUDA graph once (stream capture, then "
            "cudaGraphLaunch per request) and run larger batches",
        },
    ),
    Cause(
        MEMORY_MANAGEMENT,
        priority=30,
        color="#F0E442",  # Okabe-Ito yellow
        hatch="",
        confidence="high",
        meaning="allocator calls held the host (cudaMalloc/cudaFree synchronize the device)",
        detection="cudaMalloc/cudaFree/empty_cache/allocator ranges on the launching thread",
        remedy="allocate device and pinned memory once, outside the loop, and reuse it "
        "(allocating and freeing synchronize the device)",
        remedies={
            "pytorch": "stop allocator churn: avoid empty_cache(), reuse buffers, let the "
            "caching allocator warm up ({rt}Malloc/{rt}Free synchronize)",
            "cuda": "move cudaMalloc/cudaFree out of the loop: allocate once and reuse, or "
            "cudaMallocAsync from a memory pool",
            "hip": "move hipMalloc/hipFree out of the loop: allocate once and reuse, or "
            "hipMallocAsync from a memory pool",
            "openacc": "create device arrays once (enter data create) outside the loop, not "
            "per region; -gpu=managed or -gpu=pinned changes how host memory is allocated",
            "openmp": "allocate device memory once (target enter data map(alloc: ...) or "
            "omp_target_alloc) outside the loop and reuse it",
            "jax": "donate buffers replaced every step (donate_argnums) and avoid rebuilding "
            "large arrays on the host each step",
            "tensorrt": "create the execution context and I/O buffers once, set tensor "
            "addresses once and reuse them; no per-request cudaMalloc",
        },
    ),
    Cause(
        COMPILATION,
        priority=50,
        color="#009E73",  # Okabe-Ito bluish green
        hatch="",
        confidence="high",
        meaning="code was being compiled or loaded: JIT, module load, torch.compile, autotuning",
        detection="compile/JIT/module-load ranges, or a launch or CUDA call lasting > 1 ms on "
        "an idle GPU (lazy module loading, context initialisation)",
        remedy="compile once: build for the exact GPU, cache compiled kernels, warm up before "
        "profiling",
        remedies={
            "pytorch": "compile once: warm up before profiling, avoid recompiles (dynamic "
            "shapes, guards), cache kernels",
            "cuda": "avoid run-time JIT and lazy loading in the loop: build SASS for the GPU "
            "(-gencode arch=compute_XX,code=sm_XX), CUDA_MODULE_LOADING=EAGER",
            "hip": "build code objects for the exact GPU (--offload-arch=gfx90a/gfx942) so "
            "nothing is compiled at run time; warm up before profiling",
            "openacc": "build for the target GPU (nvc -gpu=ccXX) so nothing is JIT-compiled "
            "from PTX at start; warm up before profiling",
            "openmp": "build the offload image for the exact GPU (--offload-arch=..., nvc "
            "-gpu=ccXX) so nothing is JIT-compiled at start; warm up before profiling",
            "jax": "compile once: static shapes (pad or bucket), static_argnums for config so "
            "jit does not retrace, the persistent compilation cache",
            "tensorrt": "build the engine offline and deserialize it at start; keep a timing "
            "cache so rebuilds skip tactic autotuning",
        },
    ),
    Cause(
        COMMUNICATION,
        priority=60,
        color="#0072B2",  # Okabe-Ito blue
        hatch="",
        confidence="high",
        meaning="the host was inside a collective, or queued work was a collective",
        detection="the launching thread was in an NCCL/RCCL/gloo/c10d range, or the next GPU "
        "op is a communication kernel that followed one",
        remedy="overlap communication with compute (start it early, wait late) and check for "
        "stragglers on other ranks",
        remedies={
            "pytorch": "overlap communication with compute (bucketing, async collectives), "
            "check for stragglers on other ranks",
            "cuda": "run NCCL/MPI exchanges on their own stream overlapped with independent "
            "kernels, and check for stragglers on other ranks",
            "openacc": "pass device arrays to CUDA-aware MPI via host_data use_device, and "
            "overlap halo exchange with interior compute on async queues",
            "openmp": "pass device pointers to MPI (use_device_addr) and overlap halo exchange "
            "with nowait target tasks on interior work",
            "jax": "shard with jax.sharding / shard_map so XLA schedules collectives "
            "asynchronously next to compute; check for stragglers",
        },
    ),
    Cause(
        IO,
        priority=80,
        color="#882255",  # Tol muted wine
        hatch="///",
        confidence="high",
        meaning="file I/O held the host: checkpoints, logging, reading data files",
        detection="OS read/write/fsync calls or checkpoint/save ranges on the launching thread",
        remedy="move file I/O (checkpoints, logging) off the thread that launches GPU work, or "
        "do it less often",
        remedies={
            "pytorch": "move checkpoint/logging I/O off the training thread (async "
            "checkpointing) or do it less often",
            "jax": "checkpoint asynchronously (orbax async checkpointing) or less often, off "
            "the step's critical path",
        },
    ),
    Cause(
        CROSS_STREAM_WAIT,
        priority=None,
        color="#44AA99",  # Tol muted teal
        hatch="\\\\\\",
        confidence="medium",
        meaning="work was queued in time but its stream waited on another stream's event",
        detection="a cudaStreamWaitEvent/hipStreamWaitEvent (or a Stream Wait Event record) "
        "before the launch, on an event recorded after work of another stream still running",
        remedy="queued work waited on another stream's event: record the event right after the "
        "work it guards, split that producer, or give this stream other work meanwhile",
    ),
    Cause(
        CPU_COMPUTE,
        priority=100,
        color="#332288",  # Tol muted indigo
        hatch="xxx",
        confidence="medium",
        meaning="the launching thread ran other CPU work (ops, Python, user ranges)",
        detection="named CPU ranges covering the gap that are not dispatch of the launch itself",
        remedy="the launching thread was busy with other CPU work: move it off the step's "
        "critical path or overlap it with GPU work",
        remedies={
            "openacc": "host loops still run on the CPU between kernels: offload them too "
            "(parallel loop) or overlap them with async compute regions",
            "openmp": "host loops still run on the CPU between target regions: offload them "
            "too, or overlap them with nowait target tasks",
        },
    ),
    Cause(
        PROFILER_OVERHEAD,
        priority=40,
        color="#999933",  # Tol muted olive
        hatch="...",
        confidence="low",
        meaning="the profiler itself (buffer flushes, start-up)",
        detection="profiler overhead intervals recorded in the trace",
        remedy="profiler overhead: compare with a run that records less before acting",
        remedies={
            "pytorch": "profiler overhead: compare with a run that records less (no "
            "with_stack/record_shapes) before acting",
        },
    ),
    Cause(
        UNTRACED,
        priority=None,
        color="#BBBBBB",  # grey: unknown
        hatch="",
        confidence="low",
        meaning="nothing recorded explains the idle time",
        detection="no classified host range, sync, wait or collective covers the gap",
        remedy="nothing recorded explains this idle: profile with more host detail ({prof}) to "
        "see what the host did",
        remedies={
            "pytorch": "nothing recorded explains this idle: profile with more host detail "
            "({prof}, or record_shapes/with_stack) to see what the host did",
        },
    ),
    Cause(
        GPU_PICKUP,
        priority=None,
        color="#CC6677",  # Tol muted rose: queued work picked up, no launch wait
        hatch="|||",
        confidence="medium",
        meaning="work was already queued (launched before the gap began) and the GPU took a "
        "few µs to start it: the time between back-to-back kernels, not a wait for a launch",
        detection="the launch call of the work ending the gap had returned before the gap "
        "began, nothing recorded held it back (no stream wait, not a collective) and it "
        "started at most 50 us after the GPU went idle; large only where many tiny kernels run "
        "back to back",
        remedy="fewer, larger kernels (the GPU's own pick-up time between queued kernels): "
        "fuse adjacent kernels, batch more work per kernel",
    ),
)

#: Every cause id, in report order (ids added later go at the end: the order is a tie-break
#: of reports and ``findings.results.CATEGORIES``, never a rename).
CAUSES: Final[tuple[str, ...]] = tuple(c.id for c in CAUSE_TABLE)
CAUSE_INDEX: Final[dict[str, int]] = {c: i for i, c in enumerate(CAUSES)}
#: Number of causes (columns of attribution matrices).
N_CAUSES: Final = len(CAUSES)
#: Each cause's row, by id.
CAUSE_BY_ID: Final[dict[str, Cause]] = {c.id: c for c in CAUSE_TABLE}
#: Host-range classes, highest priority first (an instant takes the first class covering it).
PRIORITY: Final[tuple[str, ...]] = tuple(
    c.id
    for c in sorted(
        (c for c in CAUSE_TABLE if c.priority is not None), key=lambda c: c.priority or 0
    )
)


def _check(table: tuple[Cause, ...]) -> None:
    """``ValueError`` unless ids and priorities are unique and every field is filled: a wrong
    row fails at import, not in one report."""
    ids = [c.id for c in table]
    ranks = [c.priority for c in table if c.priority is not None]
    bad = [c.id for c in table if not (c.meaning and c.detection and c.remedy and c.color)]
    bad += [c.id for c in table if c.confidence not in ("high", "medium", "low")]
    if len(set(ids)) != len(ids) or len(set(ranks)) != len(ranks) or bad:
        raise ValueError(f"cause table: repeated id or priority, or incomplete rows {bad}")


_check(CAUSE_TABLE)


def in_priority(rules: Mapping[str, T]) -> list[tuple[int, T]]:
    """``(cause index, rule)`` of each host-class rule in ``rules`` (keyed by cause id),
    highest priority first: the classifier tries them in this order, first match wins.
    ``ValueError`` for a key that is not a host class (its row has no priority)."""
    if extra := set(rules) - set(PRIORITY):
        raise ValueError(f"not host classes (no priority): {sorted(extra)}")
    return [(CAUSE_INDEX[c], rules[c]) for c in PRIORITY if c in rules]


def ranked_causes(idle_by_cause: Mapping[str, int]) -> list[tuple[str, int]]:
    """Causes with idle time, largest first; ties in the stable ``CAUSES`` order. The one cause
    ranking every renderer and ``top_cause`` use."""
    nonzero = [(c, int(ns)) for c, ns in idle_by_cause.items() if ns > 0]
    return sorted(nonzero, key=lambda cn: (-cn[1], CAUSE_INDEX.get(cn[0], N_CAUSES)))
