"""Charts for the documentation, drawn from the bench's own output: the tables `make bench` writes
into bench/RESULTS.md become SVG files under docs/img/ (plain SVG text, no plotting library).

    python -m bench.charts [--results bench/RESULTS.md] [--out docs/img]

The same RESULTS.md always gives the same bytes.
"""
from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd")
UNITS = {"B": 1e-6, "kB": 1e-3, "MB": 1.0, "GB": 1e3}  # to MB


@dataclass(frozen=True)
class Table:
    """A markdown table of RESULTS.md: its header and rows of cells."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def column(self, name: str) -> int:
        return self.header.index(name)


@dataclass(frozen=True)
class Chart:
    """Horizontal grouped bars: one group per label, one bar per series."""

    title: str
    unit: str
    labels: tuple[str, ...]
    series: tuple[tuple[str, tuple[float, ...]], ...]


def cells(line: str) -> tuple[str, ...]:
    return tuple(c.strip().strip("*") for c in line.strip().strip("|").split("|"))


def table_after(text: str, heading: str) -> Table:
    """The first table below the `## heading...` line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"## {heading}"))
    first = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("|"))
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    return Table(cells(lines[first]), tuple(cells(line) for line in lines[first + 2:end]))


def number(cell: str) -> float:
    """The cell's first number: `240 (0.818 s)` -> 240, `1,023` -> 1023, `126 MiB` -> 126."""
    match = re.search(r"-?[\d,]+(?:\.\d+)?", cell)
    if match is None:
        raise ValueError(f"no number in table cell {cell!r}")
    return float(match.group().replace(",", ""))


def megabytes(text: str) -> float:
    value, unit = text.split()
    return float(value) * UNITS[unit]


def throughput(text: str) -> Chart:
    table = table_after(text, "Throughput")
    tools = ("pyarrow read_table", "retrofit (exact)", "retrofit --trust-page-stats", "pyarrow rewrite",
             "Spark rewrite")
    return Chart("Throughput, MB/s of input (higher is better)", "MB/s", tuple(r[0] for r in table.rows),
                 tuple((t, tuple(number(r[table.column(t)]) for r in table.rows)) for t in tools))


def peak_rss(text: str) -> Chart:
    table = table_after(text, "Peak RSS")
    tools = ("retrofit (exact)", "pyarrow read_table", "pyarrow rewrite", "Spark rewrite")
    return Chart("Peak memory, MiB (lower is better)", "MiB", tuple(r[0] for r in table.rows),
                 tuple((t, tuple(number(r[table.column(t)]) for r in table.rows)) for t in tools))


def lookup_bytes(text: str) -> Chart:
    """Point lookups on the sorted column: bytes `pageindex lookup` reads before and after."""
    table = table_after(text, "Query effects")
    col, query, read = (table.column(n) for n in ("column", "query", "lookup bytes read"))
    rows = [r for r in table.rows if r[col] == "id (sorted)" and r[query] == "point"]
    pairs = [tuple(megabytes(side) for side in r[read].split("->")) for r in rows]
    return Chart("Point lookup on the sort key: MB read by pageindex lookup (lower is better)", "MB",
                 tuple(r[0] for r in rows),
                 (("before retrofit", tuple(p[0] for p in pairs)), ("after retrofit", tuple(p[1] for p in pairs))))


def nice_step(top: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten giving at most 8 ticks up to `top`."""
    power = 10.0 ** (math.floor(math.log10(top)) - 1)
    return next(m * power * 10 ** k for k in range(3) for m in (1, 2, 5) if top / (m * power * 10 ** k) <= 8)


def fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def svg(chart: Chart) -> str:
    """The chart as a standalone SVG document."""
    bar, gap, left, right, top = 11, 10, 150, 70, 60
    n = len(chart.series)
    group = n * bar + gap
    width = 760
    height = top + len(chart.labels) * group + 40
    plot = width - left - right
    peak = max(max(values) for _, values in chart.series)
    step = nice_step(peak)
    ticks = int(peak // step) + 1
    scale = plot / (ticks * step)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="18" font-size="13" font-weight="bold">{escape(chart.title)}</text>']
    x = 10
    for i, (name, _) in enumerate(chart.series):  # legend
        out.append(f'<rect x="{x}" y="28" width="10" height="10" fill="{COLORS[i]}"/>')
        out.append(f'<text x="{x + 14}" y="37">{escape(name)}</text>')
        x += 20 + 6.5 * len(name)
    base = height - 30
    for t in range(ticks + 1):  # grid and axis labels
        tx = left + t * step * scale
        out.append(f'<line x1="{tx:.1f}" y1="{top - 6}" x2="{tx:.1f}" y2="{base}" stroke="#ddd"/>')
        out.append(f'<text x="{tx:.1f}" y="{base + 14}" text-anchor="middle">{fmt(t * step)}</text>')
    out.append(f'<text x="{left + plot}" y="{base + 26}" text-anchor="end">{escape(chart.unit)}</text>')
    for g, label in enumerate(chart.labels):
        y0 = top + g * group
        out.append(f'<text x="{left - 6}" y="{y0 + n * bar / 2 + 4:.1f}" text-anchor="end">{escape(label)}</text>')
        for i, (_, values) in enumerate(chart.series):
            w = values[g] * scale
            y = y0 + i * bar
            out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar - 1}" fill="{COLORS[i]}"/>')
            out.append(f'<text x="{left + w + 3:.1f}" y="{y + bar - 2}" font-size="9">{fmt(values[g])}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


CHARTS = {"throughput.svg": throughput, "peak-rss.svg": peak_rss, "lookup-bytes.svg": lookup_bytes}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.charts", description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "RESULTS.md")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args(argv)
    text = args.results.read_text()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, make in CHARTS.items():
        (args.out / name).write_text(svg(make(text)))
        print(args.out / name)


if __name__ == "__main__":
    main()
