"""DataFusion as an independent page-index consumer: did it prune pages using our index?"""
from __future__ import annotations

import re
from pathlib import Path

# DataFusion 55 prints counts >= 1000 in a rounded, human form ("2.05 K", "200.0 K", "1.05 M").
_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12, "P": 10**15}
_NUM = r"([0-9]+(?:\.[0-9]+)?)\s*([KMBGTP]?)"
_PRUNING_RE = re.compile(rf"^{_NUM}\s+total\s+→\s+{_NUM}\s+matched$")
_COUNT_RE = re.compile(rf"^{_NUM}$")
# Metric names (DataFusion 55) that matter for page-index tests.
PAGE_METRICS = (
    "page_index_pages_pruned",  # "<pages total> total → <pages matched> matched"
    "page_index_rows_pruned",  # "<rows total> total → <rows matched> matched"
    "row_groups_pruned_statistics",
    "bytes_scanned",
    "output_rows",
    "page_index_load_skipped",
)


def _num(value: str, suffix: str) -> int:
    return int(round(float(value) * _SUFFIX[suffix]))


def _split_metrics(body: str) -> list[tuple[str, str]]:
    # "a=1, b=2 total → 1 matched, c=1.05 M" -> pairs; values never contain ", <ident>=".
    parts = re.split(r",\s*(?=[A-Za-z_][A-Za-z0-9_]*=)", body)
    out = []
    for part in parts:
        if "=" in part:
            k, v = part.split("=", 1)
            out.append((k.strip(), v.strip()))
    return out


def parse_scan_metrics(plan_text: str) -> dict[str, int]:
    """Parse the ``metrics=[...]`` of the DataSourceExec (parquet) line of an EXPLAIN ANALYZE plan.

    * "N total → M matched" pruning metrics become ``name`` = N - M (pruned), ``name_total`` = N and
      ``name_matched`` = M.
    * plain counts (with DataFusion's K/M/B suffixes) become ints.
    * durations, percentages and sizes with units (e.g. "64.1 KB") are left out.
    Several DataSourceExec lines (e.g. a union) are summed.
    """
    result: dict[str, int] = {}
    found = False
    for line in plan_text.splitlines():
        if "DataSourceExec" not in line or "file_type=parquet" not in line:
            continue
        m = re.search(r"metrics=\[(.*)\]\s*$", line)
        if not m:
            continue
        found = True
        for key, raw in _split_metrics(m.group(1)):
            pm = _PRUNING_RE.match(raw)
            if pm:
                total = _num(pm.group(1), pm.group(2))
                matched = _num(pm.group(3), pm.group(4))
                for k, v in ((key, total - matched), (f"{key}_total", total), (f"{key}_matched", matched)):
                    result[k] = result.get(k, 0) + v
                continue
            cm = _COUNT_RE.match(raw)
            if cm:
                result[key] = result.get(key, 0) + _num(cm.group(1), cm.group(2))
    if not found:
        raise AssertionError(f"no parquet DataSourceExec with metrics in plan:\n{plan_text}")
    return result


def _context(page_index: bool = True, pushdown_filters: bool = True, target_partitions: int = 1):
    from datafusion import SessionConfig, SessionContext

    cfg = (
        SessionConfig()
        .set("datafusion.execution.parquet.enable_page_index", "true" if page_index else "false")
        .set("datafusion.execution.parquet.pushdown_filters", "true" if pushdown_filters else "false")
        .set("datafusion.execution.target_partitions", str(target_partitions))
    )
    return SessionContext(cfg)


def datafusion_explain_analyze(path: str | Path, sql_predicate: str, *, columns: str = "*") -> str:
    """Plan text of ``EXPLAIN ANALYZE SELECT <columns> FROM t WHERE <sql_predicate>`` with page-index pruning on."""
    ctx = _context()
    ctx.register_parquet("t", str(path))
    rows = ctx.sql(f"EXPLAIN ANALYZE SELECT {columns} FROM t WHERE {sql_predicate}").to_pylist()
    return "\n".join(r["plan"] for r in rows)


def _add_metric(result: dict[str, int], name: str, value, text: str) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        result[name] = result.get(name, 0) + value
        return
    pm = _PRUNING_RE.match(text.strip())
    if pm:
        total = _num(pm.group(1), pm.group(2))
        matched = _num(pm.group(3), pm.group(4))
        for k, v in ((name, total - matched), (f"{name}_total", total), (f"{name}_matched", matched)):
            result[k] = result.get(k, 0) + v


def datafusion_page_pruning(path: str | Path, sql_predicate: str, *, columns: str = "*") -> dict[str, int]:
    """Scan metrics DataFusion reports for ``SELECT <columns> FROM t WHERE <sql_predicate>`` on ``path``.

    Page-index pruning and filter pushdown are on, one target partition.  Keys (DataFusion 55
    metric names), summed over the parquet ``DataSourceExec`` node(s) and partitions:

    * ``page_index_pages_pruned`` (= total - matched), ``page_index_pages_pruned_total``,
      ``page_index_pages_pruned_matched``; likewise ``page_index_rows_pruned*``,
      ``row_groups_pruned_statistics*``, ``row_groups_pruned_bloom_filter*``.  DataFusion only
      exposes these as text and rounds counts >= 1000 to ~3 significant digits ("200.0 K").
    * exact integer counters: ``bytes_scanned``, ``output_rows``, ``page_index_load_skipped``,
      ``pushdown_rows_pruned``, ``pushdown_rows_matched``, ... and timings in ns (``*_time``).
    * ``result_rows``: rows the query returned.

    Without a usable page index ``page_index_pages_pruned_total`` is 0.
    The metrics come from the executed plan (``DataFrame.execution_plan().collect_metrics()``
    after ``collect()``); ``datafusion_explain_analyze`` gives the same numbers as plan text.
    """
    batches, result = datafusion_scan(path, f"SELECT {columns} FROM t WHERE {sql_predicate}")
    if "page_index_pages_pruned_total" not in result:
        # Fall back to the printed plan if the structured API did not expose the scan.
        result = parse_scan_metrics(datafusion_explain_analyze(path, sql_predicate, columns=columns))
    result["result_rows"] = sum(b.num_rows for b in batches)
    return result


def datafusion_scan(path: str | Path, query: str) -> tuple[list, dict[str, int]]:
    """The record batches of `query` (over `path` registered as t; page index and pushdown on, one
    partition) and the metrics of its parquet scan, as datafusion_page_pruning names them ({} when
    the executed plan exposes no parquet DataSourceExec)."""
    ctx = _context()
    ctx.register_parquet("t", str(path))
    df = ctx.sql(query)
    batches = df.collect()
    result: dict[str, int] = {}
    for desc, metric_set in df.execution_plan().collect_metrics():
        if desc.startswith("DataSourceExec") and "file_type=parquet" in desc:
            for metric in metric_set.metrics():
                _add_metric(result, metric.name, metric.value, repr(metric))
    return batches, result
