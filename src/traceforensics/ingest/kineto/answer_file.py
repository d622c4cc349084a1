"""The early scan's answer in its memory file: one pickle stream, then the arrays it holds out of
band, then where each one lies::

    | pickle stream (protocol 5) |pad| array 0 |pad| array 1 | ... | lengths: stream, arrays | n |
                                 ^ each array at a multiple of ALIGN      (int64 each)     (int64)

The child writes each array's bytes once, from where they lie (not copied into the stream);
the command maps the file privately (copy on write) and the arrays it unpickles are views of
that mapping, not copies of it: ~1.5k page faults and a 6 MB copy less for the 1x ResNet-50
trace (docs/benchmarks.md). The mapping lives as long as an array of it does: what outlives
the load is copied out of it (``events.owned``), so it is unmapped once the load ends.

Nothing here imports numpy (the console script imports this module before it forks).
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import BinaryIO, Final

#: Offset every array starts at a multiple of (bytes): numpy reads aligned arrays directly.
ALIGN: Final = 64
_INT: Final = struct.Struct("<q")


def write_answer(fh: BinaryIO, value: object) -> bool:
    """Whether ``value`` was written whole into the memory file ``fh`` (emptied first). On
    failure (an unpicklable value: the caller tries a smaller one) nothing is cleaned up: the
    next try empties the file again."""
    try:
        fh.seek(0)
        fh.truncate()
        arrays: list[pickle.PickleBuffer] = []
        pickle.dump(value, fh, protocol=5, buffer_callback=arrays.append)
        lengths = [fh.tell()]
        for array in arrays:
            fh.write(bytes(-fh.tell() % ALIGN))
            with array.raw() as raw:
                fh.write(raw)
                lengths.append(raw.nbytes)
        fh.write(struct.pack(f"<{len(lengths)}q", *lengths) + _INT.pack(len(arrays)))
        fh.flush()
    except Exception:
        return False
    return True


def read_answer(fd: int) -> object | None:
    """The value in the memory file ``fd`` (``write_answer``), its arrays views of a private
    mapping of the file; None when the file is empty, cut, or not such a file."""
    import mmap  # (here, in the command: not before the fork, where imports delay both)

    try:
        size = os.fstat(fd).st_size
        if size < 2 * _INT.size:
            return None
        mapped = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except (OSError, ValueError):
        return None
    data = memoryview(mapped)
    try:
        return _unpickled(data, size)
    except Exception:  # a child killed mid-answer, a damaged file: the stream reads the trace
        return None
    finally:
        data.release()  # (the arrays' own views keep the mapping while they live)


def _unpickled(data: memoryview, size: int) -> object | None:
    (n,) = _INT.unpack_from(data, size - _INT.size)
    table = size - _INT.size * (n + 2)
    if n < 0 or table < 0:
        return None
    stream, *lengths = struct.unpack_from(f"<{n + 1}q", data, table)
    buffers, at = [], stream
    for length in lengths:
        at += -at % ALIGN
        if length < 0 or at + length > table:
            return None
        buffers.append(data[at : at + length])
        at += length
    if at != table or not 0 <= stream <= table:
        return None
    value: object = pickle.loads(data[:stream], buffers=buffers)
    return value
