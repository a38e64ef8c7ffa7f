"""Tasks: pack input files into Spark tasks balanced by bytes, the largest files alone.

Largest first, each into the least loaded task it fits in; O(n log n), deterministic.
"""
from __future__ import annotations

import heapq

from pageindex.io.discovery import InputFile


def parse_size(text: str) -> int:
    """'256m', '1g', '512k' or a plain byte count."""
    text = text.strip().lower()
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    value = float(text[:-1]) * units[text[-1]] if text and text[-1] in units else float(text)
    if not 1 <= value < float(1 << 62):
        raise ValueError(f"size must be at least one byte and finite: {text!r}")
    return int(value)


def pack(files: list[InputFile], target_bytes: int) -> list[list[InputFile]]:
    """Groups of files of at most `target_bytes` each (a larger file forms a group alone)."""
    tasks: list[list[InputFile]] = []
    open_tasks: list[tuple[int, int]] = []  # (load, task index) of tasks that can take more
    for f in sorted(files, key=lambda f: (-f.size, f.url)):
        if open_tasks and open_tasks[0][0] + f.size <= target_bytes:
            load, index = heapq.heappop(open_tasks)
            tasks[index].append(f)
            heapq.heappush(open_tasks, (load + f.size, index))
            continue
        tasks.append([f])
        if f.size < target_bytes:
            heapq.heappush(open_tasks, (f.size, len(tasks) - 1))
    return tasks
