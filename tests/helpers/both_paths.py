"""Both exact-scan paths on one file: every chunk's index blocks with Arrow's decode and with the
encoded-page kernels (PAGEINDEX_SCAN_KERNEL), and how many chunks the kernels bounded."""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from pageindex.format.footer import read_footer
from pageindex.index.compute import compute_indexes
from pageindex.index.plan import plan_chunks
from pageindex.io.storage import open_source
from pageindex.scan import encoded
from pageindex.scan.nested_encoded import nested_extrema
from pageindex.scan.page_walk import walk_chunk


@contextmanager
def scan_kernel(choice: str) -> Iterator[None]:
    old = os.environ.get(encoded.ENV)
    os.environ[encoded.ENV] = choice
    try:
        yield
    finally:
        if old is None:
            del os.environ[encoded.ENV]
        else:
            os.environ[encoded.ENV] = old


@dataclass(frozen=True)
class BothPaths:
    arrow: list  # per chunk in file order: (column index bytes, offset index bytes, report)
    kernels: list
    read_encoded: int  # chunks whose extrema the kernels found (the rest fell back to Arrow)
    planned: int  # chunks planned for the kernels


def indexes(path: str, choice: str, truncate_length: int = 64, threads: int = 1) -> list:
    with scan_kernel(choice):
        source = open_source(str(path))
        try:
            footer = read_footer(source)
            plan = plan_chunks(footer, trust_page_stats=False)
            blocks, reports = compute_indexes(source, footer, plan, truncate_length, threads)
        finally:
            source.close()
    flat = [b for row in blocks for b in row]
    return [(b.column_index, b.offset_index, r) for b, r in zip(flat, reports)]


def both_paths(path: str, truncate_length: int = 64) -> BothPaths:
    arrow = indexes(path, encoded.ARROW, truncate_length)
    kernels = indexes(path, encoded.COMPILED, truncate_length)
    read = planned = 0
    with scan_kernel(encoded.COMPILED):
        source = open_source(str(path))
        try:
            footer = read_footer(source)
            for row in plan_chunks(footer, trust_page_stats=False):
                for p in row:
                    if p.encoded_order is None:
                        continue
                    planned += 1
                    pages = walk_chunk(source, p.chunk, footer.footer_start)
                    if p.chunk.leaf.max_rep or p.chunk.leaf.max_def > 1:
                        rows = footer.row_group_rows[p.chunk.row_group]
                        read += nested_extrema(p.chunk, p.order, pages, rows) is not None
                    else:
                        read += encoded.page_extrema(p.chunk, p.order, pages) is not None
        finally:
            source.close()
    return BothPaths(arrow, kernels, read, planned)


def same_on_both_paths(path: str, truncate_length: int = 64) -> BothPaths:
    """both_paths, asserting that every chunk's index blocks and report are the same on both."""
    both = both_paths(str(path), truncate_length)
    assert len(both.kernels) == len(both.arrow)
    for (ci_a, oi_a, rep_a), (ci_k, oi_k, rep_k) in zip(both.arrow, both.kernels):
        assert (ci_k, oi_k, rep_k) == (ci_a, oi_a, rep_a), rep_a.column
    return both
