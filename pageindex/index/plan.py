"""Index plan: how each column chunk's indexes will be computed, decided from the footer alone.

A chunk's order, whether its values are decoded, whether its page-header statistics are tried first,
and whether it gets a bloom filter (built from its decoded values, so such a chunk is always decoded).
"""
from __future__ import annotations

from dataclasses import dataclass

from pageindex.format.column_order import Order, order_for
from pageindex.format.footer import ChunkMeta, Footer
from pageindex.index import page_stats
from pageindex.index.bloom.columns import Chosen, choose
from pageindex.index.bloom.options import BloomOptions
from pageindex.index.fallback import Fallback
from pageindex.scan import encoded
from pageindex.scan.chunk_scan import needs_values


@dataclass(frozen=True)
class ChunkPlan:
    """One chunk's plan."""

    chunk: ChunkMeta
    order: Order
    from_headers: bool  # try page-header statistics before decoding (see page_stats.applicable)
    bloom: BloomOptions | None = None  # build a bloom filter with these options (auto: maybe)
    fallback: str = ""  # why header statistics, though trusted, are not tried (a Fallback)

    @property
    def with_values(self) -> bool:
        """An exact scan decodes the chunk's values."""
        return self.bloom is not None or needs_values(self.chunk, self.order)

    @property
    def encoded_order(self) -> Order | None:
        """The order under which an exact scan may bound the chunk from its encoded pages
        (scan/encoded.py) rather than from decoded values: not when a bloom filter wants them."""
        readable = self.bloom is None and self.order.indexable and encoded.readable(self.chunk, self.order)
        return self.order if readable else None


def plan_chunks(footer: Footer, trust_page_stats: bool, bloom: BloomOptions = BloomOptions(),
                force: bool = False, chosen: Chosen | None = None) -> tuple[tuple[ChunkPlan, ...], ...]:
    """Every chunk's plan, a tuple per row group; header statistics are tried only when trusted.
    A chunk that has a bloom filter keeps it unless `force`. `chosen`: the leaves bloom's columns
    mean in this file (bloom.columns.choose), if the caller has them."""
    wanted = (chosen or choose(bloom, footer.leaves)).leaves
    return tuple(tuple(_plan(footer, chunk, trust_page_stats, bloom, force, wanted) for chunk in row)
                 for row in footer.chunks)


def _plan(footer: Footer, chunk: ChunkMeta, trust_page_stats: bool, bloom: BloomOptions, force: bool,
          wanted: frozenset[int]) -> ChunkPlan:
    order = order_for(chunk.leaf, footer.declared_order(chunk.column))
    with_bloom = chunk.leaf.index in wanted and (force or chunk.bloom_filter is None)
    refusal = Fallback.BLOOM_FILTER if with_bloom else page_stats.applicable(chunk, order, footer.created_by)
    from_headers = trust_page_stats and refusal is None
    # A leaf that can have no ColumnIndex decodes no values for one: nothing fell back.
    fallback = refusal if trust_page_stats and refusal is not None and order.indexable else ""
    return ChunkPlan(chunk, order, from_headers, bloom if with_bloom else None, fallback)
