"""Kineto (PyTorch Profiler) JSON writer for ``synth.SynthTrace``.

Follows the modern layout (kineto >= 2024): relative float µs with 3 decimals against
``baseTimeNanoseconds``, categories cpu_op / user_annotation / python_function / cuda_runtime /
cuda_driver / kernel / gpu_memcpy / gpu_memset / cuda_sync, ``ac2g`` flow pairs keyed by the
correlation id, ``deviceProperties`` and ``distributedInfo``. ``ts``/``dur`` are spliced in as
text so that no float rounding can move a nanosecond.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from synth import SynthEvent, is_driver_api, json_compact

if TYPE_CHECKING:
    from synth import SynthTrace

_HOST_CAT = {"cpu_op": "cpu_op", "annotation": "user_annotation", "python": "python_function"}
_GPU_CAT = {
    "kernel": "kernel",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "gpu_sync": "cuda_sync",
    "gpu_annotation": "gpu_user_annotation",
}


def us(ns: int) -> str:
    """Integer ns as kineto's µs text with 3 decimals (``12.345``)."""
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def _event(fields: dict[str, Any], ts_ns: int, dur_ns: int | None) -> str:
    body = json_compact(fields)[1:-1]
    timing = f'"ts":{us(ts_ns)}' + (f',"dur":{us(dur_ns)}' if dur_ns is not None else "")
    return "{" + body + "," + timing + "}"


def _device_props(tr: SynthTrace) -> list[dict[str, Any]]:
    major, minor = tr.compute_capability
    return [
        {
            "id": d,
            "name": tr.device_name,
            "totalGlobalMem": tr.total_mem_bytes,
            "computeMajor": major,
            "computeMinor": minor,
            "maxThreadsPerBlock": 1024,
            "maxThreadsPerMultiprocessor": 2048,
            "regsPerBlock": 65536,
            "regsPerMultiprocessor": 65536,
            "warpSize": 32,
            "sharedMemPerBlock": 49152,
            "sharedMemPerMultiprocessor": 233472,
            "numSms": tr.sm_count,
            "sharedMemPerBlockOptin": 232448,
        }
        for d in tr.devices()
    ]


def _host_event(tr: SynthTrace, ev: SynthEvent, idx: int, ext: int | None) -> str:
    if ev.kind == "os_call":
        fields: dict[str, Any] = {"ph": "X", "cat": "user_annotation", "name": f"os:{ev.name}"}
        args: dict[str, Any] = {"synthetic kind": "os_call", **ev.args}
    elif ev.kind == "python":
        fields = {"ph": "X", "cat": "python_function", "name": ev.name}
        args = {"Python id": idx, "Python thread": 0, **ev.args}
    else:
        fields = {"ph": "X", "cat": _HOST_CAT[ev.kind], "name": ev.name}
        args = {"Record function id": 0, "Ev Idx": idx, **ev.args}
        if ext is not None:
            args = {"External id": ext, **args}
    fields.update(pid=tr.host_pid(ev), tid=ev.tid, args=args)
    return _event(fields, ev.start_ns, ev.dur_ns)


def _api_event(tr: SynthTrace, ev: SynthEvent, ext: int | None) -> list[str]:
    cat = "cuda_driver" if is_driver_api(ev.name) else "cuda_runtime"
    args: dict[str, Any] = {}
    if ext is not None:
        args["External id"] = ext
    if ev.name in _CBID_NAMES:
        args["cbid"] = _CBID_NAMES[ev.name]
    if ev.correlation is not None:  # a trace without ids has no key (not a null)
        args["correlation"] = ev.correlation
    pid = tr.host_pid(ev)
    fields = {"ph": "X", "cat": cat, "name": ev.name, "pid": pid, "tid": ev.tid, "args": args}
    return [_event(fields, ev.start_ns, ev.dur_ns)]


def _gpu_event(ev: SynthEvent, ext: int | None, sm_count: int) -> str:
    args: dict[str, Any] = {}
    if ext is not None:
        args["External id"] = ext
    if ev.kind == "kernel":
        grid, block = ev.grid or (1, 1, 1), ev.block or (128, 1, 1)
        blocks = grid[0] * grid[1] * grid[2]
        threads = block[0] * block[1] * block[2]
        args.update(
            {
                "queued": 0,
                "device": ev.device,
                "context": 1,
                "stream": ev.stream,
                "correlation": ev.correlation,
                "registers per thread": 32,
                "shared memory": 0,
                "blocks per SM": round(blocks / sm_count, 6),
                "warps per SM": round(blocks * -(-threads // 32) / sm_count, 6),
                "grid": list(grid),
                "block": list(block),
                "est. achieved occupancy %": 100,
            }
        )
    elif ev.kind in ("memcpy", "memset"):
        nbytes = ev.bytes or 0
        gbps = round(nbytes / ev.dur_ns, 6) if ev.dur_ns else 0
        args.update(
            {
                "device": ev.device,
                "context": 1,
                "stream": ev.stream,
                "correlation": ev.correlation,
                "bytes": nbytes,
                "memory bandwidth (GB/s)": gbps,
            }
        )
    elif ev.kind == "gpu_annotation":  # a range's span on a stream (kineto's GPU-side copy)
        args.update({"device": ev.device, "stream": ev.stream})
    else:  # gpu_sync
        kind = ev.name
        args.update({"cuda_sync_kind": kind, "stream": ev.stream, "device": ev.device})
        args.update({"context": 1, "correlation": ev.correlation or 0})
    if ev.correlation is None and ev.kind != "gpu_sync":  # no id: no key (not a null)
        args.pop("correlation", None)
    args.update(ev.args)
    fields = {
        "ph": "X",
        "cat": _GPU_CAT[ev.kind],
        "name": ev.name,
        "pid": ev.device,
        "tid": ev.stream,
        "args": args,
    }
    return _event(fields, ev.start_ns, ev.dur_ns)


def _flows(tr: SynthTrace, api: SynthEvent, gpu: SynthEvent, nth: int) -> list[str]:
    """The ``ac2g`` pair of the ``nth`` launch, as ``tr.flows`` says (none, or dangling: the
    end of every other launch's pair left out)."""
    if tr.flows == "none":
        return []
    start = {"ph": "s", "id": api.correlation, "pid": tr.host_pid(api), "tid": api.tid}
    start.update(cat="ac2g", name="ac2g")
    end = {"ph": "f", "id": gpu.correlation, "pid": gpu.device, "tid": gpu.stream}
    end.update(cat="ac2g", name="ac2g", bp="e")
    if tr.flows == "dangling" and nth % 2:
        return [_event(start, api.start_ns, None)]
    return [_event(start, api.start_ns, None), _event(end, gpu.start_ns, None)]


def _orphan_flow_end(tr: SynthTrace, end_ns: int) -> list[str]:
    """A flow end whose correlation no call has (``flows == "dangling"``)."""
    if tr.flows != "dangling":
        return []
    end = {"ph": "f", "id": 987_654_321, "pid": tr.devices()[0], "tid": 7}
    end.update(cat="ac2g", name="ac2g", bp="e")
    return [_event(end, end_ns, None)]


def _metadata(tr: SynthTrace) -> list[str]:
    out = [
        _event(
            {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "python"}},
            0,
            None,
        )
        for pid in tr.host_pids()
    ]
    for d in tr.devices():
        out.append(
            _event(
                {
                    "name": "process_name",
                    "ph": "M",
                    "pid": d,
                    "tid": 0,
                    "args": {"name": f"GPU {d}"},
                },
                0,
                None,
            )
        )
        out.append(
            _event(
                {
                    "name": "process_labels",
                    "ph": "M",
                    "pid": d,
                    "tid": 0,
                    "args": {"labels": f"GPU {d}"},
                },
                0,
                None,
            )
        )
    streams = sorted(
        {(e.device, e.stream) for e in tr.events if e.stream is not None and e.device is not None}
    )
    for dev, s in streams:
        out.append(
            _event(
                {
                    "name": "thread_name",
                    "ph": "M",
                    "pid": dev,
                    "tid": s,
                    "args": {"name": f"stream {s} "},
                },
                0,
                None,
            )
        )
    threads = {(tr.host_pid(e), e.tid) for e in tr.events if e.tid is not None and e.device is None}
    for pid, tid in sorted(threads):
        out.append(
            _event(
                {
                    "name": "thread_name",
                    "ph": "M",
                    "pid": pid,
                    "tid": tid,
                    "args": {"name": f"thread {tid} (python)"},
                },
                0,
                None,
            )
        )
    return out


_CBID_NAMES = {"cudaLaunchKernel": 211, "cuLaunchKernel": 307, "cudaMemcpyAsync": 41}


def kineto_text(tr: SynthTrace) -> str:
    """The whole trace as JSON text."""
    exts = tr.resolved_external_ids()
    # graph trace mode: Kineto has no graph-level record, so the graph nodes are not written
    recorded = {id(e) for e in tr.recorded()}
    order = sorted(
        (i for i in range(len(tr.events)) if id(tr.events[i]) in recorded),
        key=lambda i: (tr.events[i].start_ns, -tr.events[i].dur_ns),
    )
    by_corr_api: dict[int, SynthEvent] = {}
    for e in tr.events:
        if e.kind == "cuda_api" and e.correlation is not None:
            by_corr_api.setdefault(e.correlation, e)
    lines = _metadata(tr)
    launched = 0
    end = max((e.end_ns for e in tr.events), default=0)
    span = {
        "ph": "X",
        "cat": "Trace",
        "name": "PyTorch Profiler (0)",
        "pid": "Spans",
        "tid": "PyTorch Profiler",
        "args": {"Op count": 0},
    }
    lines.append(_event(span, 0, end))
    for i in order:
        ev = tr.events[i]
        if ev.kind in ("cpu_op", "annotation", "python", "os_call"):
            lines.append(_host_event(tr, ev, i, exts[i]))
        elif ev.kind == "cuda_api":
            lines.extend(_api_event(tr, ev, exts[i]))
        else:
            lines.append(_gpu_event(ev, exts[i], tr.sm_count))
            api = by_corr_api.get(ev.correlation) if ev.correlation is not None else None
            if api is not None and ev.kind != "gpu_sync":
                lines.extend(_flows(tr, api, ev, launched))
                launched += 1
    lines.extend(_orphan_flow_end(tr, end))
    lines.append(
        _event({"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": ""}, end, None)
    )
    head = {
        "schemaVersion": 1,
        "deviceProperties": _device_props(tr),
        "distributedInfo": {"backend": "nccl", "rank": tr.rank, "world_size": tr.world_size},
        "record_shapes": 1,
        "cupti_version": 24,
        "cuda_runtime_version": 12080,
        "cuda_driver_version": 12080,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": tr.base_ns,
    }
    head_text = json_compact(head)[:-1]
    events_text = ",\n".join(lines)
    tail = json_compact({"traceName": "synthetic.pt.trace.json"})[1:]
    return head_text + ',"traceEvents":[\n' + events_text + "\n]," + tail + "\n"
