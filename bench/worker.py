"""One measured operation per process: `python -m bench.worker OP ARGS...`.

The last stdout line is a JSON object; "seconds" is the operation alone (imports and interpreter
start excluded; the parent also records the process wall time). pyarrow is limited to one CPU
thread and one I/O thread, and the parent pins the process to one core.
"""
from __future__ import annotations

import inspect
import io
import json
import os
import re
import resource
import sys
import time
from contextlib import contextmanager, redirect_stdout
from typing import Iterator

from bench.measure import status_bytes


def _single_thread() -> None:
    import pyarrow as pa

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)


PRIME_ENV = "BENCH_PRIME_MB"


def _prime_memory() -> None:
    """Touch and free BENCH_PRIME_MB MiB just before the timed operation, then reset VmHWM.

    On a VM that hands freed memory back to its host (free page reporting), the first touch of
    such memory costs the faulting process 1-2 ms per MiB: pyarrow's read_table of the
    numeric 200 MB file took 1.20-1.55 s after 6 idle seconds, 0.42-0.44 s primed
    (`python -m bench.prime_check`, bench/RESULTS-prime.md). The page cache of a file written is such memory too. Primed with
    its own peak plus what it writes, every tool starts as on a machine that kept its memory,
    whatever ran before it."""
    mb = int(os.environ.get(PRIME_ENV) or 0)
    if mb <= 0:
        return
    import numpy as np

    # A big numpy array asks for transparent huge pages, as Arrow's allocator does: the same
    # kind of page the operation will fault in.
    block = np.ones(mb << 20, dtype=np.uint8)
    del block
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS, so the priming is not the peak reported


# System-wide counters of direct reclaim, compaction, huge-page faults and page-cache refaults,
# read around each timed operation: they tell an outlier caused by the kernel's memory work from
# one caused by the tool. Not shown in the tables; kept in results.json.
VMSTAT_KEYS = ("allocstall_normal", "allocstall_movable", "pgscan_direct", "compact_stall",
               "thp_fault_alloc", "thp_fault_fallback", "workingset_refault_file")


def _vmstat() -> dict[str, int]:
    try:
        with open("/proc/vmstat") as f:
            pairs = (line.split() for line in f)
            return {k: int(v) for k, v in pairs if k in VMSTAT_KEYS}
    except OSError:
        return {}


@contextmanager
def _measured() -> Iterator[dict]:
    """Times the block: its wall and CPU seconds (user and system apart), this process's page
    faults and the system's memory counters over it, filled in on exit. "rss_start": the
    resident memory the operation starts from (interpreter, libraries, warm-up leftovers)."""
    out: dict = {"rss_start": status_bytes("self", "VmRSS")}
    usage, vm = resource.getrusage(resource.RUSAGE_SELF), _vmstat()
    started, cpu = time.perf_counter(), time.process_time()
    yield out
    out["seconds"], out["cpu"] = time.perf_counter() - started, time.process_time() - cpu
    after, vm_after = resource.getrusage(resource.RUSAGE_SELF), _vmstat()
    out["memory_work"] = {
        "system_cpu": round(after.ru_stime - usage.ru_stime, 3),
        "minor_faults": after.ru_minflt - usage.ru_minflt,
        "major_faults": after.ru_majflt - usage.ru_majflt,
        **{k: vm_after[k] - vm[k] for k in vm if k in vm_after},
    }


def _emit(obj: dict) -> None:
    # This process image's peak RSS. Not ru_maxrss: Linux carries the parent's high-water mark
    # over fork+exec into ru_maxrss, which would charge the harness's own memory to every child.
    obj.setdefault("vmhwm", status_bytes("self", "VmHWM"))
    sys.stdout.write("\n" + json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


def trust_support() -> dict:
    """Whether this checkout's pageindex has the trust-page-stats option (API and CLI)."""
    import pageindex
    from pageindex import cli
    api = "trust_page_stats" in inspect.signature(pageindex.retrofit).parameters
    help_text = io.StringIO()
    try:
        with redirect_stdout(help_text):
            cli.main(["retrofit", "--help"])
    except SystemExit:
        pass
    return {"api": api, "cli": "--trust-page-stats" in help_text.getvalue()}


def _warm_path() -> str:
    """A tiny file each op processes once, untimed, so first-call costs (lazy imports, pyarrow's
    dataset machinery, allocator warm-up) land outside every tool's timing alike."""
    from bench.datasets import DATA_DIR, tiny_file

    return tiny_file(str(DATA_DIR / "tiny-warmup.parquet"))


def _summary_counts(text: str) -> dict:
    out = {}
    for key, pattern in (("pages", r"pages (\d+)"), ("chunks", r"chunks (\d+)"),
                         ("chunks_with_column_index", r"(\d+) with ColumnIndex"),
                         ("chunks_from_page_stats", r"(\d+) from page-header statistics")):
        m = re.search(pattern, text)
        if m:
            out[key] = int(m.group(1))
    out.setdefault("chunks_from_page_stats", 0)
    return out


def op_retrofit(path: str, mode: str = "exact") -> dict:
    """`pageindex retrofit PATH` in place (on a fresh copy the parent made), through the CLI.

    mode: exact | trust (--trust-page-stats) | trust-api (the library option, when the CLI lacks
    it); a "-dry" suffix adds --dry-run (compute the index, write nothing)."""
    import pageindex
    from pageindex import cli
    dry = mode.endswith("-dry")
    mode = mode.removesuffix("-dry")
    with redirect_stdout(io.StringIO()):
        cli.main(["retrofit", "--dry-run", "--force", _warm_path()])
    captured = io.StringIO()
    _prime_memory()
    if mode == "trust-api":
        with _measured() as timing:
            result = pageindex.retrofit(path, trust_page_stats=True, dry_run=dry)
        rc = 0
        counts = {"pages": result.pages, "chunks": len(result.chunks),
                  "chunks_from_page_stats": sum(getattr(c, "source", "") == "page_stats" for c in result.chunks)}
    else:
        argv = ["retrofit", path] + (["--trust-page-stats"] if mode == "trust" else []) + (
            ["--dry-run"] if dry else [])
        with _measured() as timing, redirect_stdout(captured):
            rc = cli.main(argv)
        counts = _summary_counts(captured.getvalue())
    return {**timing, "rc": rc, "size_after": os.path.getsize(path),
            "output": captured.getvalue()[-2000:], **counts}


def op_retrofit_api(path: str) -> dict:
    """pageindex.retrofit(PATH) in place through the library, with page and chunk counts."""
    import pageindex

    with _measured() as timing:
        result = pageindex.retrofit(path)
    return {**timing, "pages": result.pages, "chunks": len(result.chunks),
            "row_groups": result.row_groups, "bytes_in": result.bytes_in,
            "bytes_out": result.bytes_out, "status": result.status}


def op_rewrite(src: str, dst: str, kind_name: str) -> dict:
    """pyarrow full rewrite with a page index, keeping the kind's compression and page settings."""
    import pyarrow.parquet as pq

    from bench.datasets import KINDS, write_options

    opts = write_options(KINDS[kind_name]) | {"write_page_index": True}
    pq.write_table(pq.read_table(_warm_path(), use_threads=False), dst, **opts)
    os.unlink(dst)
    _prime_memory()
    with _measured() as timing:
        # Keep the input's row-group layout (pyarrow's default would merge them into 1M-row groups).
        rg_rows = pq.ParquetFile(src).metadata.row_group(0).num_rows
        table = pq.read_table(src, use_threads=False)
        pq.write_table(table, dst, row_group_size=rg_rows, **opts)
    return {**timing, "size_after": os.path.getsize(dst),
            "row_groups": pq.ParquetFile(dst).metadata.num_row_groups}


def op_read_table(src: str) -> dict:
    import pyarrow.parquet as pq

    pq.read_table(_warm_path(), use_threads=False)
    _prime_memory()
    with _measured() as timing:
        table = pq.read_table(src, use_threads=False)
    return {**timing, "decoded_bytes": table.nbytes}


def op_decompress(src: str) -> dict:
    """The floor of any exact retrofit: read every column chunk's bytes and decompress every page
    (one pyarrow codec call each, into Arrow's memory pool), nothing decoded. Where the pages are
    is learned first, untimed, with pageindex's page walk."""
    import pyarrow as pa

    from pageindex.format.footer import read_footer
    from pageindex.format.parquet_thrift import CompressionCodec, PageType
    from pageindex.io.storage import open_source
    from pageindex.scan.page_walk import walk_chunk

    chunks = []  # (codec, start, length, [(body offset in the chunk, compressed, uncompressed)])
    with open_source(src) as source:
        footer = read_footer(source)
        for row in footer.chunks:
            for chunk in row:
                pages = walk_chunk(source, chunk, footer.footer_start)
                bodies = []
                for page in ((pages.dictionary,) if pages.dictionary else ()) + pages.pages:
                    # A v2 page's levels are stored uncompressed ahead of its values.
                    levels = page.def_levels_size + page.rep_levels_size if page.kind == PageType.DATA_PAGE_V2 else 0
                    if page.is_compressed:
                        bodies.append((page.offset - pages.start + page.header_size + levels,
                                       page.compressed_size - levels, page.uncompressed_size - levels))
                chunks.append((chunk.codec, pages.start, len(pages.data), bodies))
    codecs = {c: pa.Codec(CompressionCodec.name(c).lower()) for c, _, _, bodies in chunks if bodies}
    fd = os.open(src, os.O_RDONLY)
    _prime_memory()
    try:
        with _measured() as timing:
            decompressed = 0
            for codec, start, length, bodies in chunks:
                data = memoryview(os.pread(fd, length, start))
                for offset, size, uncompressed in bodies:
                    codecs[codec].decompress(data[offset:offset + size], uncompressed, asbytes=False)
                    decompressed += uncompressed
                del data
    finally:
        os.close(fd)
    return {**timing, "decompressed_bytes": decompressed}


def op_queries(spec_json: str) -> dict:
    """DataFusion page pruning and pageindex lookup I/O for a list of queries on some files."""
    from pageindex.query.lookup import lookup
    from tests.helpers.datafusion import datafusion_page_pruning

    spec = json.loads(spec_json)
    out = []
    for q in spec["queries"]:
        row = dict(q)
        started = time.perf_counter()
        m = datafusion_page_pruning(q["path"], q["where"], columns=", ".join(q["columns"]))
        row["df_seconds"] = time.perf_counter() - started
        row["df"] = {k: m.get(k) for k in (
            "page_index_pages_pruned", "page_index_pages_pruned_total", "page_index_rows_pruned",
            "page_index_rows_pruned_total", "row_groups_pruned_statistics", "bytes_scanned",
            "output_rows", "result_rows")}
        started = time.perf_counter()
        table, stats = lookup(q["path"], q["where"], columns=q["columns"])
        row["lookup_seconds"] = time.perf_counter() - started
        row["lookup_bytes_read"] = stats.bytes_read
        row["lookup_rows"] = table.num_rows
        out.append(row)
    return {"queries": out}


def op_index_sizes(path: str) -> dict:
    """Bytes of ColumnIndex and OffsetIndex blocks in a file, from pageindex's footer decoder."""
    from pageindex.format.footer import read_footer
    from pageindex.io.storage import open_source

    if os.path.isdir(path):
        files = sorted(os.path.join(path, f) for f in os.listdir(path)
                       if f.endswith(".parquet") and not f.startswith((".", "_")))
    else:
        files = [path]
    import hashlib

    from pageindex.index.reader import read_offset_index

    ci = oi = chunks = with_ci = with_oi = pages = 0
    layout = hashlib.sha256()  # every chunk's page row boundaries, to tell equal page layouts
    for f in files:
        with open_source(f) as source:
            footer = read_footer(source)
            for row in footer.chunks:
                for c in row:
                    chunks += 1
                    if c.column_index:
                        ci += c.column_index[1]
                        with_ci += 1
                    if c.offset_index:
                        oi += c.offset_index[1]
                        with_oi += 1
                        view = read_offset_index(source, c)
                        pages += len(view.pages)
                        layout.update(repr([p.first_row_index for p in view.pages]).encode())
    return {"column_index_bytes": ci, "offset_index_bytes": oi, "chunks": chunks,
            "chunks_with_column_index": with_ci, "chunks_with_offset_index": with_oi,
            "files": len(files), "pages": pages, "layout": layout.hexdigest()[:16]}


def op_profile(path: str, out_prefix: str) -> dict:
    """cProfile of an in-memory retrofit (dry run: no copy, no fsync) of PATH."""
    import cProfile
    import pstats

    import pageindex

    pageindex.retrofit(_warm_path(), dry_run=True, force=True)
    prof = cProfile.Profile()
    started = time.perf_counter()
    prof.enable()
    pageindex.retrofit(path, dry_run=True, force=True)
    prof.disable()
    seconds = time.perf_counter() - started
    prof.dump_stats(out_prefix + ".prof")
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text)
    stats.sort_stats("cumulative").print_stats(30)
    stats.sort_stats("tottime").print_stats(20)
    with open(out_prefix + ".txt", "w") as f:
        f.write(text.getvalue())
    return {"seconds": seconds, "profile": out_prefix + ".txt"}


def op_scale_job(src_dir: str, out_dir: str, master: str = "local[2]") -> dict:
    """pageindex.job.spark.main on a directory of files, with a given local Spark session."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from bench.spark_worker import session_builder
    from pageindex.job.spark import spark as job
    started = time.perf_counter()
    spark = session_builder(master).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    jvm_start = time.perf_counter() - started
    captured = io.StringIO()
    started = time.perf_counter()
    with redirect_stdout(captured):
        rc = job.main(["--input", src_dir, "--output", out_dir, "--progress-seconds", "3600"],
                      spark=spark)
    seconds = time.perf_counter() - started
    from bench.measure import tree_hwm

    tree = tree_hwm(os.getpid())  # driver + JVM + Python workers still alive
    spark.stop()
    SparkSession._instantiatedSession = None
    return {"seconds": seconds, "jvm_start": jvm_start, "rc": rc, "tree_vmhwm": tree,
            "output": captured.getvalue()[-1500:]}


OPS = {
    "retrofit": op_retrofit, "retrofit_api": op_retrofit_api, "rewrite": op_rewrite, "read_table": op_read_table,
    "decompress": op_decompress,
    "queries": op_queries, "index_sizes": op_index_sizes, "profile": op_profile,
    "scale_job": op_scale_job, "trust_support": lambda: trust_support(),
    "prime": lambda: _prime_memory() or {},  # for a shell tool (cp) run right after this process
}


def main(argv: list[str]) -> int:
    _single_thread()
    op, args = argv[0], argv[1:]
    _emit(OPS[op](*args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
