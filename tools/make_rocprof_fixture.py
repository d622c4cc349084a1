"""Build small rocprof Chrome traces in tests/fixtures/rocprof/ from one invented capture.

Usage: python tools/make_rocprof_fixture.py [OUT_DIR]

The capture (``CAPTURE``): a HIP program on one AMD Instinct MI210 copies three inputs to the
GPU, runs one kernel while a device-to-device copy runs on a second stream, and copies two
results back; a roctx range spans it. One kernel and six copies, like the trace of issue 43.

Two files hold it, each laid out the way its producer writes (facts from ROCm's sources, no code
taken from them):

- ``v1_results.json``: rocprof v1 (``rocprof --hip-trace``, ``bin/tblextr.py``): the text starts
  ``{ "traceEvents":[{}`` (an empty first event), lanes are processes named by ``process_name``
  events (``Markers and Ranges`` 0, ``COPY`` 1, ``CPU HIP API`` 2, ``GPU0`` 6, ``GPU Barriers0``
  518), events have no ``cat``, ``ts``/``dur`` are µs written as text (``dur`` "1" when 0),
  exact times are in ``args.BeginNs``/``EndNs``, no correlation id is written, and each call is
  tied to its op by a ``DataFlow`` flow (``s`` at the call's middle, ``t`` at the op's start);
  ``otherData`` holds rocminfo's lines flattened (``Agent2.MarketingName``: blanks removed).
- ``v2_output.json``: rocprofv2 ``--plugin json``: nlohmann's sorted, 2-space dump; processes
  ``CPU`` 1, ``GPU`` 2, ``COPY`` 3, ``HIPBLITKERNELS`` 4; ``cat`` CPU/GPU/COPY; ``ts``/``dur`` µs
  as text; ``args.cid`` the correlation id; kernels on ``tid`` agent + 1, copies on ``tid`` 1.

Output is deterministic (fixed rows, no clocks).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "rocprof"

PID, THREAD = 4242, 4243
T0 = 1_048_928_000_311_041  # ns on the host's monotonic clock
KERNEL = "void vector_add<float>(float*, float const*, float const*, int)"

#: (call, call start, call end, op name or None, op start, op end, stream) in ns after T0.
CAPTURE: tuple[tuple[str, int, int, str | None, int, int, int], ...] = (
    ("hipMalloc", 1_000, 41_500, None, 0, 0, 0),
    ("hipMemcpy", 50_000, 98_000, "CopyHostToDevice", 61_200, 90_700, 1),
    ("hipMemcpy", 100_000, 151_000, "CopyHostToDevice", 112_300, 141_900, 1),
    ("hipMemcpy", 153_000, 201_000, "CopyHostToDevice", 163_500, 193_100, 1),
    ("hipLaunchKernel", 210_000, 216_400, KERNEL, 230_150, 480_650, 1),
    ("hipMemcpyAsync", 220_000, 224_100, "CopyDeviceToDevice", 240_000, 330_500, 2),
    ("hipStreamSynchronize", 225_000, 481_900, None, 0, 0, 0),
    ("hipMemcpy", 490_000, 541_000, "CopyDeviceToHost", 500_400, 530_800, 1),
    ("hipMemcpy", 545_000, 599_000, "CopyDeviceToHost", 556_600, 588_200, 1),
)
#: Bytes each copying call (by its index in ``CAPTURE``) moves.
SIZES = {1: 4 << 20, 2: 4 << 20, 3: 1 << 20, 5: 16 << 20, 7: 4 << 20, 8: 64 << 10}
RANGE = ("forward", 500, 600_000)
ROCMINFO = {
    "CMD": "rocminfo",
    "Agent1.Name": "AMDEPYC776364-CoreProcessor",
    "Agent1.DeviceType": "CPU",
    "Agent1.ComputeUnit": "128",
    "Agent2.Name": "gfx90a",
    "Agent2.MarketingName": "AMDInstinctMI210",
    "Agent2.VendorName": "AMD",
    "Agent2.DeviceType": "GPU",
    "Agent2.ComputeUnit": "104",
    "Agent2.MaxClockFreq.(MHz)": "1700",
}


def ops() -> list[dict[str, Any]]:
    """The GPU ops of the capture: ``name, start_ns, end_ns, stream, copy`` (absolute ns)."""
    return [
        {"name": o, "start_ns": T0 + s, "end_ns": T0 + e, "stream": st, "copy": o != KERNEL}
        for _, _, _, o, s, e, st in CAPTURE
        if o is not None
    ]


def _v1_event(name: str, pid: int, tid: int, begin: int, end: int, args: dict[str, str]) -> str:
    dur = (end - begin) // 1000
    head = (
        f'{{"ph":"X","name":"{name}","pid":{pid},"tid":{tid},'
        f'"ts":"{begin // 1000}","dur":"{dur if dur else 1}",'
    )
    body = ",\n    ".join(f'"{k}":"{v}"' for k, v in args.items())
    return f',{head}\n  "args":{{\n    {body}\n  }}\n}}\n'


def _call_args(index: int, stream: int) -> str:
    """A call's arguments as v1 writes them (roctracer's ``a=b, c=d`` turned into ``a(b) c(d)``)."""
    parts = [f"sizeBytes({SIZES[index]})"] if index in SIZES else []
    parts += [f"stream({stream})"] if stream else []
    return f"( {' '.join(parts)})"


def v1_text() -> str:
    """The capture as rocprof v1's ``results.json``."""
    out = ['{ "traceEvents":[{}\n']
    v1_lanes = (
        ("Markers and Ranges", 0),
        ("CPU HIP API", 2),
        ("COPY", 1),
        ("GPU0", 6),
        ("GPU Barriers0", 518),
    )
    for index, (label, pid) in enumerate(v1_lanes):
        out.append(
            f',{{"args":{{"name":"{label}"}},"ph":"M","pid":{pid},'
            f'"name":"process_name","sort_index":{index}}}\n'
        )
    name, b, e = RANGE
    out.append(
        _v1_event(name, 0, THREAD, T0 + b, T0 + e, {"BeginNs": str(T0 + b), "EndNs": str(T0 + e)})
    )
    flows: list[str] = []
    for index, (call, cb, ce, op, ob, oe, stream) in enumerate(CAPTURE, start=1):
        begin, end = T0 + cb, T0 + ce
        api_args = {
            "BeginNs": str(begin),
            "EndNs": str(end),
            "pid": str(PID),
            "tid": str(THREAD),
            "Name": call,
            "args": _call_args(index - 1, stream),
            "Data": "",
            "DurationNs": str(end - begin),
        }
        out.append(_v1_event(call, 2, THREAD, begin, end, api_args))
        if op is None:
            continue
        lane = 1 if op != KERNEL else 6
        op_args = {
            "BeginNs": str(T0 + ob),
            "EndNs": str(T0 + oe),
            "dev-id": "0",
            "queue-id": "0",
            "Name": op,
            "pid": str(PID),
            "tid": str(THREAD),
            "stream-id": str(stream),
            "Data": "",
            "DurationNs": str(oe - ob),
        }
        out.append(_v1_event(op, lane, stream, T0 + ob, T0 + oe, op_args))
        to_us = (T0 + ob) // 1000
        from_us = min(begin // 1000 + ((end - begin) // 1000) // 2, to_us)
        flows.append(
            f',{{"ts":{from_us},"ph":"s","cat":"DataFlow","id":{index},"pid":2,'
            f'"tid":{THREAD},"name":"dep"}}\n'
            f',{{"ts":{to_us},"ph":"t","cat":"DataFlow","id":{index},"pid":{lane},'
            f'"tid":{stream},"name":"dep"}}\n'
        )
    # v1's call-to-hipStreamSynchronize flow: its ends sit on lanes with no row there
    sync_us = (T0 + CAPTURE[6][1]) // 1000
    flows.append(
        f',{{"ts":{sync_us},"ph":"s","cat":"DataFlow","id":99,"pid":6,"tid":{THREAD},'
        f'"name":"dep"}}\n,{{"ts":{sync_us},"ph":"t","cat":"DataFlow","id":99,"pid":2,'
        f'"tid":1,"name":"dep"}}\n'
    )
    out.extend(flows)
    other = ",\n".join(f'    "{k}": "{v}"' for k, v in ROCMINFO.items())
    out.append(f'],\n"otherData": {{\n{other}\n  }}\n}}')
    return "".join(out)


def v2_document() -> dict[str, Any]:
    """The capture as rocprofv2's ``--plugin json`` document."""
    v2_lanes = (("CPU", 1), ("GPU", 2), ("COPY", 3), ("HIPBLITKERNELS", 4))
    meta = [
        {"args": {"name": label}, "name": "process_name", "ph": "M", "pid": pid, "sort_index": i}
        for i, (label, pid) in enumerate(v2_lanes)
    ]

    def event(name: str, cat: str, pid: int, tid: int, begin: int, end: int, cid: int) -> Any:
        start, dur = begin // 1000, end // 1000 - begin // 1000
        return {
            "args": {"cid": cid},
            "cat": cat,
            "dur": str(dur or 1),
            "name": name,
            "ph": "X",
            "pid": pid,
            "tid": tid,
            "ts": str(start),
        }

    copies, calls, kernels, flows = [], [], [], []
    for cid, (call, cb, ce, op, ob, oe, _) in enumerate(CAPTURE, start=1):
        calls.append(event(call, "CPU", 1, THREAD, T0 + cb, T0 + ce, cid))
        if op is None:
            continue
        pid, tid = (3, 1) if op != KERNEL else (2, 1)  # tid: agent 0 + 1; copies: 1
        (copies if pid == 3 else kernels).append(
            event(op, "COPY" if pid == 3 else "GPU", pid, tid, T0 + ob, T0 + oe, cid)
        )
        for ph, fpid, ftid, ts in (("s", 1, THREAD, T0 + cb), ("t", pid, tid, T0 + ob)):
            flows.append(
                {"cat": "DataFlow", "id": len(flows) // 2, "name": "dep", "ph": ph, "pid": fpid}
                | {"tid": ftid, "ts": ts // 1000}
            )
    return {"traceEvents": meta + copies + calls + kernels + flows}


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else OUT
    out.mkdir(parents=True, exist_ok=True)
    (out / "v1_results.json").write_text(v1_text())
    (out / "v2_output.json").write_text(json.dumps(v2_document(), indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
