"""Which chunks get a bloom filter: the requested columns, or `auto`'s rule, with the filter's fpp
and size cap.

`auto` takes a leaf of type INT32, INT64, BYTE_ARRAY or FIXED_LEN_BYTE_ARRAY (never booleans,
which have no filter, nor floats, which are rarely looked up by equality) and, once its values are
decoded, keeps a chunk's filter when both hold (measured in bench/bloom.py, see bench/RESULTS-bloom.md):
- its ColumnIndex is not ordered (over AUTO_MIN_ORDERED_PAGES pages or more: two random pages are
  in order half the time): on sorted data min/max statistics already rule out the row groups a
  filter would (a sorted column: statistics 88% of row groups, the filter 0% more);
- at least AUTO_MIN_DISTINCT_SHARE of its values are distinct, by the estimate the filter's own
  set bits give before it is folded (BloomFilter.estimated_ndv: nothing counts distinct values
  exactly; its error is in bench/RESULTS-bloom.md). Values spread evenly over the row groups of
  n rows from D distinct ones give a chunk a share s = (D/n)(1 - e^(-n/D)), and a value present
  in the file is missing from another row group, where the filter can skip it, with probability
  e^(-n/D): at s = 0.5 about 20%. Measured: s 0.37 skipped 7%, 0.74 46%, 0.94 79%,
  unique 87%.
Whether the chunk is dictionary-encoded does not matter: only parquet-java prunes by dictionaries
(DataFusion read every row group of a fully dictionary-encoded unique column), and a dictionary is
hashed once, not per row.
"""
from __future__ import annotations

from dataclasses import dataclass

from pageindex.format.parquet_thrift import Type
from pageindex.index.bloom.sbbf import DEFAULT_FPP, DEFAULT_MAX_BYTES, check_options

NONE, AUTO = "none", "auto"
AUTO_TYPES = frozenset({Type.INT32, Type.INT64, Type.BYTE_ARRAY, Type.FIXED_LEN_BYTE_ARRAY})
AUTO_MIN_DISTINCT_SHARE = 0.5
AUTO_MIN_ORDERED_PAGES = 4


@dataclass(frozen=True)
class BloomOptions:
    """columns: NONE, AUTO, or the dotted leaf paths to give a filter."""

    columns: str | tuple[str, ...] = NONE
    fpp: float = DEFAULT_FPP
    max_bytes: int = DEFAULT_MAX_BYTES

    def __post_init__(self) -> None:
        check_options(self.fpp, self.max_bytes)
        if isinstance(self.columns, str) and self.columns not in (NONE, AUTO):
            raise ValueError(f"bloom_filter must be {NONE!r}, {AUTO!r} or a list of columns, not {self.columns!r}")

    @property
    def auto(self) -> bool:
        return self.columns == AUTO

    @property
    def named(self) -> tuple[str, ...]:
        return self.columns if isinstance(self.columns, tuple) else ()


def bloom_options(spec: str | list[str] | tuple[str, ...] | None, fpp: float = DEFAULT_FPP,
                  max_bytes: int = DEFAULT_MAX_BYTES) -> BloomOptions:
    """Options from the library argument or a flag: "none", "auto", a list of dotted column paths
    or one comma-separated string of them."""
    if spec is None or spec == NONE:
        return BloomOptions(NONE, fpp, max_bytes)
    if spec == AUTO:
        return BloomOptions(AUTO, fpp, max_bytes)
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    names = tuple(dict.fromkeys(name.strip() for name in names if name.strip()))
    if not names:
        raise ValueError("bloom_filter names no column")
    return BloomOptions(names, fpp, max_bytes)


def auto_keeps(ndv: int, values: int, ordered: bool) -> bool:
    """auto's rule for one decoded chunk (see the module docstring); `ndv` is the estimate."""
    return not ordered and values > 0 and ndv >= AUTO_MIN_DISTINCT_SHARE * values
