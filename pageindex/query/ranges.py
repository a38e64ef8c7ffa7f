"""Row ranges of a row group: sorted, disjoint, half-open (start, end) runs of rows, merged,
intersected, and mapped to positions within the rows a page fetch covered.
"""
from __future__ import annotations

import numpy as np

Ranges = list[tuple[int, int]]  # sorted, disjoint, half-open row ranges within a row group


def merge(ranges: Ranges) -> Ranges:
    out: Ranges = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def intersect(a: Ranges, b: Ranges) -> Ranges:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def positions(covered: Ranges, wanted: Ranges) -> np.ndarray:
    """Positions, within the concatenation of `covered` rows, of every row in `wanted` (both
    sorted and disjoint; every wanted row lies in a covered range). One merge pass."""
    out = []
    i, base = 0, 0
    for start, end in wanted:
        while i < len(covered) and covered[i][1] <= start:
            base += covered[i][1] - covered[i][0]
            i += 1
        j, j_base = i, base
        while j < len(covered) and covered[j][0] < end:
            lo, hi = max(start, covered[j][0]), min(end, covered[j][1])
            if lo < hi:
                out.append(np.arange(j_base + lo - covered[j][0], j_base + hi - covered[j][0], dtype=np.int64))
            j_base += covered[j][1] - covered[j][0]
            j += 1
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
