"""Exact-scan bench: the floor F1 (read every chunk, walk its page headers, decompress every page),
pyarrow's decode, and the exact dry run on Arrow's path and on the encoded-page kernels, per dataset.

    python -m bench.scan [--size 60] [--kinds numeric,strings_low,...,spark_like] [--rounds 5]
    python -m bench.scan --size 40 --kinds enc_dbp_int64,...  (other value encodings: bench.encodings)

One process, one thread; the operations of a dataset run interleaved (order rotated each round)
and each one's median main-thread CPU time and wall time over the rounds is reported; ratios are
of CPU time (the machine may be shared: the load average is printed before and after). F1 is
measured with pyarrow's decompressors and with cramjam's into a reused buffer (snappy, zstd); the
faster is the floor; its page headers are walked by the compiled walk (header_kernel), and
once more in Python for comparison. The Arrow path runs with no compiled code at all (headers
walked in Python, values decoded by Arrow). Kernel figures: ns per value of each kernel alone on
the dataset's pages, decompressed beforehand.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.datasets import DATA_DIR, KINDS, MiB, ensure, spec_for
from bench.encodings import ENCODED_KINDS, encoded_file
from pageindex.errors import MalformedFileError
from pageindex.format.compression import decompress
from pageindex.format.footer import read_footer
from pageindex.format.parquet_thrift import CompressionCodec, Encoding, PageType
from pageindex.index.plan import plan_chunks
from pageindex.io.storage import open_source
from pageindex.retrofit import retrofit
from pageindex.scan import delta_values, encoded, nested_encoded
from pageindex.scan.page_levels import needs_level_decoding
from pageindex.scan.page_walk import DICTIONARY_ENCODINGS, walk_chunk

PRIME_BYTES = 256 << 20
SPARK_LIKE = "spark_like"


def spark_like(target_bytes: int) -> Path:
    """The issue's Spark-like table: sorted int64 ids, a small int32, dictionary strings (zipf over
    1,000 words), UUID strings (dictionary overflows, then PLAIN), doubles with 10% nulls,
    increasing timestamps; snappy, v1 pages, 2 row groups."""
    rows = int(target_bytes / 62)
    path = DATA_DIR / f"spark_like-{rows}.parquet"
    if path.exists():
        return path
    rng = np.random.default_rng(42)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz_ABCDEFGHIJKLMNOPQRSTUVWXYZ", np.uint8)
    vocab = sorted({bytes(letters[rng.integers(0, len(letters), int(n))]).decode()
                    for n in rng.integers(8, 21, 1000)})
    words = pa.array(vocab).take(pa.array(np.minimum(rng.zipf(1.3, rows) - 1, len(vocab) - 1)))
    hexd = np.frombuffer(b"0123456789abcdef", np.uint8)
    text = np.full((rows, 36), ord("-"), np.uint8)
    text[:, [i for i in range(36) if i not in (8, 13, 18, 23)]] = hexd[rng.integers(0, 16, (rows, 32))]
    uuids = pa.Array.from_buffers(pa.string(), rows, [None, pa.py_buffer(np.arange(rows + 1, dtype=np.int32) * 36),
                                                      pa.py_buffer(text.tobytes())])
    table = pa.table({
        "id": np.arange(rows, dtype=np.int64) + 10_000_000,
        "category": rng.integers(0, 50, rows, dtype=np.int32),
        "country": words,
        "uuid": uuids,
        "amount": pa.array(rng.normal(100.0, 50.0, rows), mask=rng.random(rows) < 0.1),
        "event_ts": pa.array((1_700_000_000_000_000 + np.cumsum(rng.integers(0, 2_000_000, rows))
                              ).astype("datetime64[us]"), pa.timestamp("us")),
    })
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp, row_group_size=-(-rows // 2), data_page_version="1.0", compression="snappy",
                   write_page_index=False, write_statistics=True)
    tmp.rename(path)
    return path


def _cramjam() -> dict[int, Callable] | None:
    try:
        import cramjam
    except ImportError:
        return None
    return {CompressionCodec.SNAPPY: cramjam.snappy.decompress_raw_into,
            CompressionCodec.ZSTD: cramjam.zstd.decompress_into}


def floor(path: str, into: dict[int, Callable] | None) -> int:
    """F1: every chunk read, its pages walked, every page (v2: its values) decompressed; with
    `into`, by cramjam into one reused buffer where it has the codec. Returns the bytes produced."""
    produced = 0
    buffer = np.empty(1 << 20, np.uint8)
    with open_source(path) as source:
        footer = read_footer(source)
        for row in footer.chunks:
            for chunk in row:
                pages = walk_chunk(source, chunk, footer.footer_start)
                listed = ([pages.dictionary] if pages.dictionary else []) + list(pages.pages)
                for page in listed:
                    body, size = pages.body(page), page.uncompressed_size
                    if page.kind == PageType.DATA_PAGE_V2:
                        skip = page.rep_levels_size + page.def_levels_size
                        body, size = body[skip:], size - skip
                        if not page.is_compressed:
                            continue
                    if chunk.codec == CompressionCodec.UNCOMPRESSED:
                        continue
                    fast = into.get(chunk.codec) if into else None
                    if fast is None:
                        produced += len(decompress(chunk.codec, body, size))
                        continue
                    if len(buffer) < size:
                        buffer = np.empty(size, np.uint8)
                    produced += fast(body, buffer[:size])
    return produced


# F1 with the page headers walked in Python (the reference walk): not a floor candidate, it shows
# what the compiled header walk (pageindex.scan.header_kernel) saves.
PYTHON_WALK = "F1 cramjam into, page walk in Python"


def python_walk(op: Callable[[], object]) -> object:
    """`op` with the compiled code off: page headers are then walked in Python."""
    os.environ[encoded.ENV] = encoded.ARROW
    try:
        return op()
    finally:
        del os.environ[encoded.ENV]


def pyarrow_decode(path: str) -> None:
    reader = pq.ParquetFile(path)
    for rg in range(reader.num_row_groups):
        reader.read_row_group(rg, use_threads=False)


def dry_run(path: str, choice: str) -> None:
    os.environ[encoded.ENV] = choice
    try:
        retrofit(path, dry_run=True)
    finally:
        del os.environ[encoded.ENV]


BEFORE = "exact dry run, kernels, other encodings to Arrow"


def dry_run_before(path: str) -> None:
    """The kernels' dry run with DELTA_* and BYTE_STREAM_SPLIT pages handed to Arrow (as before
    scan.delta_values read them), for a side-by-side ratio."""
    kept = delta_values.DELTA_ENCODINGS
    delta_values.DELTA_ENCODINGS = frozenset()
    try:
        dry_run(path, encoded.COMPILED)
    finally:
        delta_values.DELTA_ENCODINGS = kept


def kernel_figures(path: str) -> dict[str, float]:
    """ns per value of each kernel alone over the file's pages it would read (decompressed first)."""
    os.environ[encoded.ENV] = encoded.COMPILED
    try:
        k = encoded.kernels()
        work: dict[str, list[Callable[[], None]]] = {"levels": [], "nested levels": [], "dictionary indices": [],
                                                     "PLAIN numbers": [], "PLAIN byte arrays": [],
                                                     **{name: [] for name in _OTHER_ENCODINGS.values()}}
        counts = dict.fromkeys(work, 0)
        with open_source(path) as source:
            footer = read_footer(source)
            for row in plan_chunks(footer, trust_page_stats=False):
                for planned in row:
                    if planned.encoded_order is None:
                        continue
                    _chunk_kernels(k, source, footer, planned, work, counts)
        out = {}
        for name, calls in work.items():
            if not counts[name]:
                continue
            best = min(_timed_all(calls) for _ in range(3))
            out[name] = best / counts[name] * 1e9
        return out
    finally:
        del os.environ[encoded.ENV]


def _timed_all(calls: list[Callable[[], None]]) -> float:
    started = time.thread_time()
    for call in calls:
        call()
    return time.thread_time() - started


def _chunk_kernels(k, source, footer, planned, work, counts) -> None:
    chunk = planned.chunk
    pages = walk_chunk(source, chunk, footer.footer_start)
    nested = needs_level_decoding(chunk)
    scanner = (nested_encoded.NestedScanner(k, nested_encoded.level_kernels(), chunk, planned.order, pages)
               if nested else encoded.Scanner(k, chunk, planned.order, pages))
    for page in pages.pages:
        try:
            buf, defined = (_nested_levels if nested else _flat_levels)(k, scanner, page, work, counts)
        except (encoded.Unread, MalformedFileError):
            return  # a page the encoded path leaves to Arrow: not a kernel's work
        if defined <= 0:
            continue
        if page.value_encoding in DICTIONARY_ENCODINGS:
            d = _held(scanner._dictionary())
            if scanner.bytes and not d.ranked:
                work["dictionary indices"].append(lambda b=buf, n=defined, d=d: k.index_bytes(
                    b, 0, len(b), n, d.ordered.body, d.ordered.starts, d.lengths))
            elif scanner.bytes:
                work["dictionary indices"].append(
                    lambda b=buf, n=defined, d=d: k.index_ranks(b, 0, len(b), n, d.rank, d.lengths))
            else:
                work["dictionary indices"].append(
                    lambda b=buf, n=defined, d=d: k.index_values(b, 0, len(b), n, d.ordered))
            counts["dictionary indices"] += defined
        elif page.value_encoding == Encoding.PLAIN and scanner.bytes:
            work["PLAIN byte arrays"].append(lambda b=buf, n=defined: k.plain_bytes(b, 0, len(b), n))
            counts["PLAIN byte arrays"] += defined
        elif page.value_encoding == Encoding.PLAIN:
            work["PLAIN numbers"].append(lambda b=buf, n=defined: scanner._plain(b, n))
            counts["PLAIN numbers"] += defined
        elif page.value_encoding in _OTHER_ENCODINGS:
            # decoded (scan.delta_values) and bounded: the page's whole work, as the scan calls it
            name = _OTHER_ENCODINGS[page.value_encoding]
            work[name].append(lambda b=buf, n=defined, e=page.value_encoding: scanner._delta(e, b, n))
            counts[name] += defined


_OTHER_ENCODINGS = {Encoding.DELTA_BINARY_PACKED: "DELTA_BINARY_PACKED", Encoding.DELTA_LENGTH_BYTE_ARRAY:
                    "DELTA_LENGTH_BYTE_ARRAY", Encoding.DELTA_BYTE_ARRAY: "DELTA_BYTE_ARRAY",
                    Encoding.BYTE_STREAM_SPLIT: "BYTE_STREAM_SPLIT"}


def _flat_levels(k, scanner, page, work, counts) -> tuple[np.ndarray, int]:
    """A flat page's definition levels timed through level_zeros; its values and defined count."""
    values, nulls = scanner._sections(page)
    # Copies: the scan decompresses into buffers it reuses for the next page and chunk.
    buf = np.array(np.frombuffer(values, np.uint8) if not isinstance(values, np.ndarray) else values)
    if scanner.chunk.leaf.max_def != 1:
        return buf, page.num_values
    body = scanner.pages.body(page)
    if page.kind == PageType.DATA_PAGE_V2:
        levels = np.frombuffer(body[:page.def_levels_size], np.uint8).copy()
        start, end = 0, len(levels)
    else:
        levels = np.frombuffer(decompress(scanner.chunk.codec, body, page.uncompressed_size), np.uint8).copy()
        start, end = 4, 4 + int(levels[:4].view("<u4")[0])
    work["levels"].append(lambda lv=levels, s=start, e=end, n=page.num_values: k.level_zeros(lv, s, e, n))
    counts["levels"] += page.num_values
    return buf, page.num_values - nulls


def _nested_levels(k, scanner, page, work, counts) -> tuple[np.ndarray, int]:
    """A nested page's level streams timed through level_histogram; its values and defined count."""
    leaf = scanner.chunk.leaf
    found, i = scanner.counter.empty(), scanner.pages.pages.index(page)
    buf = np.array(scanner.counter.page(page, i, found, True))  # a copy, as in _flat_levels
    def_hist = found.def_h[i]
    body = scanner.pages.body(page)
    if page.kind == PageType.DATA_PAGE_V2:
        bounds = [(leaf.max_rep, 0, page.rep_levels_size),
                  (leaf.max_def, page.rep_levels_size, page.rep_levels_size + page.def_levels_size)]
        levels = np.frombuffer(body[:page.rep_levels_size + page.def_levels_size], np.uint8).copy()
    else:
        levels = np.frombuffer(decompress(scanner.chunk.codec, body, page.uncompressed_size), np.uint8).copy()
        bounds, pos = [], 0
        for max_level in (leaf.max_rep, leaf.max_def):
            if max_level:
                size = int(levels[pos:pos + 4].view("<u4")[0])
                bounds.append((max_level, pos + 4, pos + 4 + size))
                pos += 4 + size
    for max_level, start, end in bounds:
        if max_level:
            hist = np.zeros(max_level + 1, np.int64)
            work["nested levels"].append(lambda lv=levels, s=start, e=end, n=page.num_values, m=max_level, h=hist:
                                         scanner.counter.levels.level_histogram(lv, s, e, n, m, h))
            counts["nested levels"] += page.num_values
    return buf, int(def_hist[leaf.max_def])


def _held(d):
    """A chunk's dictionary copied out of the buffer the scan reuses for the next chunk's."""
    ordered = d.ordered
    if isinstance(ordered, np.ndarray):
        ordered = ordered.copy()
    elif isinstance(ordered, encoded._Spans):
        ordered = encoded._Spans(ordered.body.copy(), ordered.starts, ordered.lengths)
    return encoded._Dictionary(d.rank, d.lengths, ordered)


def _prime() -> None:
    """Touch and free memory before each timed operation, so none pays the VM's first-touch cost
    for memory an earlier one freed (see bench/RESULTS.md, "Memory priming")."""
    block = np.ones(PRIME_BYTES, np.uint8)
    del block


def measure(path: str, rounds: int, other_encodings: bool = False) -> dict:
    into = _cramjam()
    ops: dict[str, Callable[[], object]] = {
        "F1 pyarrow codecs": lambda: floor(path, None),
        "pyarrow read_row_group": lambda: pyarrow_decode(path),
        "exact dry run, Arrow path": lambda: dry_run(path, encoded.ARROW),
        "exact dry run, kernels": lambda: dry_run(path, encoded.COMPILED),
    }
    if other_encodings:
        ops[BEFORE] = lambda: dry_run_before(path)
    if into is not None:
        ops["F1 cramjam into"] = lambda: floor(path, into)
        ops[PYTHON_WALK] = lambda: python_walk(lambda: floor(path, into))
    for op in ops.values():  # imports, compiled kernels, page cache
        op()
    cpu: dict[str, list[float]] = {name: [] for name in ops}
    wall: dict[str, list[float]] = {name: [] for name in ops}
    names = list(ops)
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            gc.collect()
            _prime()
            w, c = time.perf_counter(), time.thread_time()
            ops[name]()
            cpu[name].append(time.thread_time() - c)
            wall[name].append(time.perf_counter() - w)
    return {name: {"cpu": statistics.median(cpu[name]), "wall": statistics.median(wall[name])} for name in ops}


def report(name: str, path: str, times: dict, kernels: dict[str, float]) -> str:
    f1_name = min((n for n in times if n.startswith("F1") and n != PYTHON_WALK), key=lambda n: times[n]["cpu"])
    f1 = times[f1_name]["cpu"]
    arrow = times["pyarrow read_row_group"]["cpu"]
    lines = [f"### {name} ({os.path.getsize(path) / MiB:.0f} MiB, {pq.ParquetFile(path).metadata.num_row_groups} row groups)",
             "", "| operation | CPU s | wall s | / F1 | / pyarrow read_row_group |", "|---|---|---|---|---|"]
    for op, t in times.items():
        lines.append(f"| {op} | {t['cpu']:.3f} | {t['wall']:.3f} | {t['cpu'] / f1:.2f} | {t['cpu'] / arrow:.2f} |")
    lines += ["", f"F1 = {f1_name}. Exact dry run, Arrow path / kernels: "
              f"{times['exact dry run, Arrow path']['cpu'] / times['exact dry run, kernels']['cpu']:.2f}x."
              + (f" Other encodings to Arrow / read by the kernels: "
                 f"{times[BEFORE]['cpu'] / times['exact dry run, kernels']['cpu']:.2f}x." if BEFORE in times else ""), ""]
    if kernels:
        lines.append("Kernels, ns per value: " + ", ".join(f"{k} {v:.2f}" for k, v in kernels.items()) + ".")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=float, default=60, help="dataset size in MB (bench.datasets kinds)")
    parser.add_argument("--kinds", default=",".join([*KINDS, SPARK_LIKE]))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="also write the raw figures here")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{os.cpu_count()} CPUs; pyarrow {pa.__version__}", flush=True)
    raw = {}
    for kind in args.kinds.split(","):
        if kind == SPARK_LIKE:
            name, path = f"{SPARK_LIKE}-{args.size:.0f}MB", str(spark_like(int(args.size * MiB)))
        elif kind in ENCODED_KINDS:
            name, path = f"{kind}-{args.size:.0f}MB", str(encoded_file(kind, int(args.size * MiB)))
        else:
            dataset = ensure(spec_for(kind, int(args.size * MiB)))
            name, path = dataset.name, dataset.path
        times = measure(path, args.rounds, kind in ENCODED_KINDS)
        kernels = kernel_figures(path)
        raw[name] = {"times": times, "kernels": kernels}
        print(report(name, path, times, kernels), flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=2))


if __name__ == "__main__":
    main()
