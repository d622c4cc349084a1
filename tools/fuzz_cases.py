"""Mutated inputs for the fuzz suite (tests/test_fuzz.py) and the long profile
(tools/fuzz_long.py): real Kineto traces, nsys exports and monitoring logs, damaged on purpose.

Every mutator takes the original bytes (or file) and a ``random.Random`` and writes one damaged
input; ``FAMILIES`` names them. The check for every case is the same: ``tf`` ends with exit 0, or
exit 2 and one line, never an internal error, and leaves the input and its folder untouched.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import random
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples/synthetic_training.pt.trace.json.gz"
NSYS = ROOT / "tests/fixtures/nsys/modern.sqlite"
LOG = ROOT / "tests/fixtures/monitor/runbook_zh_1hz.txt"

#: Values a type-confused field can hold.
ODD_VALUES: list[Any] = [
    None, "", "x", "²", "NaN", -1, 0, 2**31, 2**63 - 1, -(2**63), 1e308, -0.5, True,
    [], [[]], [None], {"a": 1}, "\u202e", "a\nb", [2**40, -3], [[2**62, 2**62]],
]  # fmt: skip


def _bytes_damage(data: bytes, rng: random.Random) -> bytes:
    """Flip, insert, delete or truncate a few bytes."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if not out:
            break
        i = rng.randrange(len(out))
        op = rng.choice(("flip", "insert", "delete", "truncate"))
        if op == "flip":
            out[i] = rng.randrange(256)
        elif op == "insert":
            out[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif op == "delete":
            del out[i : i + rng.randint(1, 64)]
        else:
            del out[i:]
    return bytes(out)


def kineto_bytes(path: Path, rng: random.Random) -> None:
    """Byte damage inside the (decompressed) JSON, written back gzipped or plain."""
    data = _bytes_damage(gzip.decompress(EXAMPLE.read_bytes()), rng)
    path.write_bytes(gzip.compress(data, mtime=0) if rng.random() < 0.5 else data)


def kineto_fields(path: Path, rng: random.Random) -> None:
    """Valid JSON whose fields hold values of the wrong type or range."""
    doc = json.loads(gzip.decompress(EXAMPLE.read_bytes()))
    events = doc["traceEvents"]
    for _ in range(rng.randint(1, 12)):
        ev = rng.choice(events)
        target = ev["args"] if ("args" in ev and rng.random() < 0.5) else ev
        keys = [*target.keys(), "correlation", "device", "stream", "Input Dims", "External id"]
        target[rng.choice(keys)] = rng.choice(ODD_VALUES)
    if rng.random() < 0.3:
        doc["deviceProperties"] = rng.choice([None, [], [{"id": rng.choice(ODD_VALUES)}], "x"])
    if rng.random() < 0.2:  # many events sharing one id
        for ev in rng.sample(events, min(len(events), 200)):
            if isinstance(ev.get("args", {}), dict):
                ev.setdefault("args", {})["correlation"] = 1
    path.write_text(json.dumps(doc, allow_nan=True))


def nsys_fields(path: Path, rng: random.Random) -> None:
    """An export whose cells hold text, blobs, NULLs or huge ids; or a dropped column."""
    shutil.copyfile(NSYS, path)
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for _ in range(rng.randint(1, 6)):
            table = rng.choice(tables)
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            if not cols:
                continue
            col = rng.choice(cols)
            value = rng.choice([None, "text", b"\xde\xad", 2**63 - 1, -1, 0.5, "\xff"])
            if rng.random() < 0.1:
                with contextlib.suppress(sqlite3.DatabaseError):
                    conn.execute(f'ALTER TABLE "{table}" DROP COLUMN "{col}"')
                continue
            with contextlib.suppress(sqlite3.DatabaseError):
                conn.execute(
                    f'UPDATE "{table}" SET "{col}" = ? WHERE rowid IN '
                    f'(SELECT rowid FROM "{table}" ORDER BY random() LIMIT 3)',
                    (value,),
                )
    if rng.random() < 0.2:
        with sqlite3.connect(path) as conn:
            conn.commit()
            conn.execute("PRAGMA journal_mode=WAL")


def nsys_bytes(path: Path, rng: random.Random) -> None:
    """Byte damage in an SQLite export (pages, header, truncation)."""
    path.write_bytes(_bytes_damage(NSYS.read_bytes(), rng))


def log_lines(path: Path, rng: random.Random) -> None:
    """A monitoring log with lines shuffled, separators swapped, cells replaced or cut."""
    lines = LOG.read_text(encoding="utf-8").splitlines()
    lines += [ln for ln in lines[1:] for _ in range(rng.randint(0, 3))]
    for _ in range(rng.randint(1, 10)):
        i = rng.randrange(len(lines))
        op = rng.choice(("sep", "cell", "cut", "dup", "swap", "garbage"))
        if op == "sep":
            lines[i] = lines[i].replace(" ", rng.choice([",", ";", "\t", "  ", "|"]))
        elif op == "cell":
            cells = lines[i].split()
            if cells:
                cells[rng.randrange(len(cells))] = str(rng.choice(ODD_VALUES))
                lines[i] = " ".join(cells)
        elif op == "cut":
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
        elif op == "dup":
            lines.insert(i, lines[0])
        elif op == "swap":
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines[i] = "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randint(1, 40)))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")


#: family -> (file name, mutator, tf command)
#: Pieces of the file names a user can hand over (no ``/`` or NUL: the OS refuses those).
NAME_PIECES = [
    "trace", "rank0", " ", "\n", "\r", "\t", "\x1b[31m", "\x7f", "-", "é", "日本", "😀", "%s",
    "{}", "'", '"', "\\", ";", "$(x)", "\u202e", "..", "#", "*", "?", "\udcff", "\u2028",
]  # fmt: skip
NAME_SUFFIXES = [".json", ".json.gz", ".pt.trace.json", ".sqlite", ".nsys-rep", ".txt", ""]


def odd_paths(path: Path, rng: random.Random) -> Path:
    """An input under an odd name (control characters, RTL marks, shell syntax, very long), of
    an odd kind: a good trace, an export, garbage, an empty file, a broken link, a symlink
    loop, a link to a trace, a folder of rank files, an empty folder, a folder named like a
    trace. Returns the path handed to ``tf`` (FIFOs have their own test: they could block)."""
    folder = path.parent
    stem = "".join(rng.choice(NAME_PIECES) for _ in range(rng.randint(1, 5)))
    if rng.random() < 0.1:
        stem = stem + "x" * rng.choice([200, 250, 300])  # near and beyond NAME_MAX (255)
    target = folder / ("f" + stem + rng.choice(NAME_SUFFIXES))
    kind = rng.choice(
        ["trace", "trace", "export", "garbage", "empty", "broken-link", "loop", "link",
         "ranks", "empty-dir"]
    )  # fmt: skip
    # a name the file system refuses (too long): tf is given a path that is not there
    with contextlib.suppress(OSError):
        _make_odd(target, kind, rng)
    return target


def _make_odd(target: Path, kind: str, rng: random.Random) -> None:
    if kind == "trace":
        target.write_bytes(EXAMPLE.read_bytes())
    elif kind == "export":
        shutil.copyfile(NSYS, target)
    elif kind == "garbage":
        target.write_bytes(rng.randbytes(rng.randint(1, 4096)))
    elif kind == "empty":
        target.write_bytes(b"")
    elif kind == "broken-link":
        target.symlink_to(target.parent / "nowhere")
    elif kind == "loop":
        target.symlink_to(target)
    elif kind == "link":
        real = target.parent / "real.json.gz"
        real.write_bytes(EXAMPLE.read_bytes())
        target.symlink_to(real)
    elif kind == "ranks":
        target.mkdir()
        for i in range(rng.randint(1, 3)):
            (target / f"rank{i}{rng.choice(NAME_PIECES)}.json.gz").write_bytes(EXAMPLE.read_bytes())
    else:
        target.mkdir()


#: Values a top-level metadata field of a Kineto trace can hold in a damaged or hand-made file.
META_VALUES: list[Any] = [
    *ODD_VALUES, 5, 1e308, "x", {"id": 0}, [5], [[]], [{"id": "x", "name": 7}],
    [{"name": None, "computeMajor": "a", "totalGlobalMem": -1}], [{"id": 2**63 - 1}],
]  # fmt: skip


def kineto_meta(path: Path, rng: random.Random) -> None:
    """Top-level keys of odd types (issue 43: a numeric ``deviceProperties`` was exit 3):
    ``deviceProperties``, ``distributedInfo``, ``schemaVersion``, ``baseTimeNanoseconds``,
    ``displayTimeUnit``, ``traceName``, ROCm keys; sometimes events duplicated or one kernel
    made to last years (impossible input: flagged, figures within their window)."""
    doc = json.loads(gzip.decompress(EXAMPLE.read_bytes()))
    keys = ["deviceProperties", "distributedInfo", "schemaVersion", "baseTimeNanoseconds",
            "displayTimeUnit", "traceName", "roctracer_version", "cupti_version"]  # fmt: skip
    for _ in range(rng.randint(1, 4)):
        doc[rng.choice(keys)] = rng.choice(META_VALUES)
    events = doc["traceEvents"]
    if rng.random() < 0.2:
        doc["traceEvents"] = events + [dict(e) for e in rng.sample(events, len(events) // 2)]
    if rng.random() < 0.2:
        kernels = [e for e in events if e.get("cat") == "kernel"]
        rng.choice(kernels)["dur"] = rng.choice([292 * 365 * 86_400 * 1e6, 1e15, 9e12, 2**53])
    path.write_text(json.dumps(doc, allow_nan=True))


def nsys_strings(path: Path, rng: random.Random) -> None:
    """``StringIds`` damaged (issue 43: invalid UTF-8 or a text id was exit 3): the table
    rebuilt without its INTEGER PRIMARY KEY (so ids can be text, reals, blobs, NULL), values
    as blobs, invalid UTF-8, numbers, NULL or huge; ids duplicated or deleted (dangling)."""
    shutil.copyfile(NSYS, path)
    with sqlite3.connect(path) as conn:
        if rng.random() < 0.7:
            conn.executescript(
                "CREATE TABLE S2(id, value); INSERT INTO S2 SELECT id, value FROM StringIds;"
                "DROP TABLE StringIds; ALTER TABLE S2 RENAME TO StringIds;"
            )
        ids = [r[0] for r in conn.execute("SELECT id FROM StringIds")]
        odd_ids: list[Any] = ["abc", "12", 2.5, b"\xff", None, 2**63 - 1, -1, "\u202e"]
        odd_values: list[Any] = [b"\xff\xfe", b"A\xffB", 7, 2.5, None, "\udcff", "x" * 70_000,
                                 "a\x00b", "\u202e", ""]  # fmt: skip
        for _ in range(rng.randint(1, 12)):
            row = rng.choice(ids)
            op = rng.choice(("id", "value", "text-bytes", "dup", "delete"))
            with contextlib.suppress(sqlite3.DatabaseError, ValueError, OverflowError):
                if op == "id":
                    conn.execute(
                        "UPDATE StringIds SET id = ? WHERE id = ?", (rng.choice(odd_ids), row)
                    )
                elif op == "value":
                    value = rng.choice(odd_values)
                    if isinstance(value, str):
                        value = value.encode("utf-8", "surrogatepass")
                        conn.execute(
                            "UPDATE StringIds SET value = CAST(? AS TEXT) WHERE id = ?",
                            (value, row),
                        )
                    else:
                        conn.execute("UPDATE StringIds SET value = ? WHERE id = ?", (value, row))
                elif op == "text-bytes":  # TEXT cells holding bytes that are not UTF-8
                    conn.execute(
                        "UPDATE StringIds SET value = CAST(X'41ff42c3' AS TEXT) WHERE id = ?",
                        (row,),
                    )
                elif op == "dup":
                    conn.execute("INSERT INTO StringIds SELECT id, value || 'b' FROM StringIds "
                                 "WHERE id = ?", (row,))  # fmt: skip
                else:
                    conn.execute("DELETE FROM StringIds WHERE id = ?", (row,))
        if rng.random() < 0.05:
            conn.execute("DROP TABLE StringIds")


FAMILIES: dict[str, tuple[str, Callable[[Path, random.Random], Path | None], str]] = {
    "kineto-bytes": ("trace.json", kineto_bytes, "analyze"),
    "kineto-fields": ("trace.json", kineto_fields, "analyze"),
    "kineto-meta": ("trace.json", kineto_meta, "analyze"),
    "nsys-fields": ("export.sqlite", nsys_fields, "analyze"),
    "nsys-bytes": ("export.sqlite", nsys_bytes, "analyze"),
    "nsys-strings": ("export.sqlite", nsys_strings, "analyze"),
    "log-lines": ("smi.txt", log_lines, "monitor"),
    "paths": ("unused", odd_paths, "analyze"),
}


def make_case(family: str, seed: int, folder: Path) -> tuple[Path, str]:
    """Write case ``seed`` of an input ``family`` into ``folder``: ``(input path, tf
    command)``."""
    name, mutate, command = FAMILIES[family]
    path = folder / name
    moved = mutate(path, random.Random(f"{family}:{seed}"))
    return (moved or path), command


def snapshot(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every entry under ``folder`` (links not followed): size, mtime (ns) and bytes for files,
    the link text for links, ``b"<dir>"`` for folders."""
    out: dict[str, tuple[int, int, bytes]] = {}
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in [*dirs, *files]:
            p = Path(root) / name
            st = p.lstat()
            if p.is_symlink():
                body = os.readlink(p).encode("utf-8", "surrogateescape")
            elif p.is_dir():
                body = b"<dir>"
            else:
                body = p.read_bytes()
            out[str(p.relative_to(folder))] = (st.st_size, st.st_mtime_ns, body)
    return out


def verdict(code: int, err: str) -> str:
    """``ok`` (exit 0), ``refused`` (exit 2, one actionable line) or what went wrong."""
    lines = err.strip().splitlines()
    if "internal error" in err or code == 3:
        return "internal-error"
    if code == 0:
        return "ok"
    if code == 2 and len(lines) == 1 and lines[0].startswith("tf: error: ") and ";" in lines[0]:
        return "refused"
    if code == 2:
        return "bad-message"
    return "crash" if code < 0 or code > 3 else f"exit-{code}"
