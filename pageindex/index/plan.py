"""Index plan: how each column chunk's indexes will be computed, decided from the footer alone.

A chunk's order, whether its values are decoded, and whether its page-header statistics are tried first.
"""
from __future__ import annotations

from dataclasses import dataclass

from pageindex.format.column_order import Order, order_for
from pageindex.format.footer import ChunkMeta, Footer
from pageindex.index import page_stats
from pageindex.scan.chunk_scan import needs_values


@dataclass(frozen=True)
class ChunkPlan:
    """One chunk's plan."""

    chunk: ChunkMeta
    order: Order
    from_headers: bool  # try page-header statistics before decoding (see page_stats.applicable)

    @property
    def with_values(self) -> bool:
        """An exact scan decodes the chunk's values."""
        return needs_values(self.chunk, self.order)


def plan_chunks(footer: Footer, trust_page_stats: bool) -> tuple[tuple[ChunkPlan, ...], ...]:
    """Every chunk's plan, a tuple per row group; header statistics are tried only when trusted."""
    return tuple(tuple(_plan(footer, chunk, trust_page_stats) for chunk in row) for row in footer.chunks)


def _plan(footer: Footer, chunk: ChunkMeta, trust_page_stats: bool) -> ChunkPlan:
    order = order_for(chunk.leaf, footer.declared_order(chunk.column))
    from_headers = trust_page_stats and page_stats.applicable(chunk, order, footer.created_by) is None
    return ChunkPlan(chunk, order, from_headers)
