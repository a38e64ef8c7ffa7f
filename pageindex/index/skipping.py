"""What skipping a file's index allows readers (pages, row groups by bloom filter, or neither),
in words a user can act on: `pageindex inspect` and the retrofit summaries say it.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum

# The engines measured reading the page index and bloom filters (docs/engines.md); pyarrow.dataset
# and polars read neither, and `pageindex lookup` reads both.
INDEX_READERS = "Spark, DataFusion and DuckDB"


class NoSkipping(StrEnum):
    """Why a file's index lets no reader skip a page: each chunk it helps must have a ColumnIndex
    over more than one page."""

    ONE_PAGE = "one data page per column chunk"
    NO_COLUMN_INDEX = "no column chunk with several pages could have a ColumnIndex"


# What is left to a user whose files skip no page, by reason.
REMEDY: dict[str, str] = {
    NoSkipping.ONE_PAGE: "row-group statistics still skip row groups, and bloom filters can too "
                         "(`--bloom-filter COLUMN` for columns looked up by value); to skip pages, "
                         "write smaller pages",
    NoSkipping.NO_COLUMN_INDEX: "row-group statistics still skip row groups, and bloom filters can too "
                                "(`--bloom-filter COLUMN` for columns looked up by value)",
}


def no_page_skipping(chunks: Iterable[tuple[int, bool]]) -> NoSkipping | None:
    """Why chunks given as (pages, has a ColumnIndex) let a reader skip no page, if they do not
    (None too when there are none)."""
    shapes = list(chunks)
    if not shapes or any(column_index and pages > 1 for pages, column_index in shapes):
        return None
    return NoSkipping.ONE_PAGE if all(pages <= 1 for pages, _ in shapes) else NoSkipping.NO_COLUMN_INDEX


def skipping_advice(reason: NoSkipping | str | None, blooms: str = "",
                    ordered_columns: Sequence[str] | None = None) -> str:
    """The skipping a file (or every file of a lake) allows, as one sentence: `reason` is
    no_page_skipping's answer; `blooms` names its bloom filters ("bloom filters on user_id"), if it
    has any; `ordered_columns`, where known, the columns whose pages a point lookup mostly skips
    (sorted or clustered)."""
    if reason is None:
        text = f"page skipping: {INDEX_READERS} skip pages on filters over sorted or clustered columns"
        if ordered_columns:
            text += f" (here: {', '.join(ordered_columns)})"
        elif ordered_columns is not None:
            text += ("; no column here is ordered enough for a point lookup to skip most pages: "
                     "sort or cluster the data on the columns you filter by")
    else:
        # a report from another version may give a reason this one has no remedy for
        remedy = REMEDY.get(reason)
        text = f"no page skipping: {reason}" + (f"; {remedy}" if remedy else "")
    if blooms:
        text += f"; {blooms} skip row groups on equality lookups"
    return text
