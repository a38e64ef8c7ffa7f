"""Small synthetic Parquet files with known layouts, written by pyarrow."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def write_sorted_int_file(
    path: str | Path,
    num_rows: int = 200_000,
    *,
    page_index: bool,
    start: int = 0,
    data_page_size: int = 4096,
    write_batch_size: int | None = None,
    compression: str = "snappy",
    use_dictionary: bool = True,
) -> Path:
    """One row group, many pages: sorted int64 ``k`` = start..start+num_rows-1 and double ``v`` = 2*k.

    pyarrow cuts pages only between write batches (1024 rows by default), so with a small
    ``data_page_size`` every page holds ``write_batch_size`` rows.
    """
    path = Path(path)
    k = np.arange(start, start + num_rows, dtype=np.int64)
    table = pa.table({"k": k, "v": k.astype(np.float64) * 2})
    kwargs = {}
    if write_batch_size is not None:
        kwargs["write_batch_size"] = write_batch_size
    pq.write_table(
        table,
        path,
        write_page_index=page_index,
        data_page_size=data_page_size,
        row_group_size=max(num_rows, 1),
        compression=compression,
        use_dictionary=use_dictionary,
        **kwargs,
    )
    return path


def tail_region(path: str | Path) -> tuple[int, int]:
    """Byte range [start, end) between the end of the last column chunk and the start of the footer.

    For a file with a page index this is exactly where the ColumnIndex and OffsetIndex structures
    live (pyarrow and parquet-java write them after all row groups and before the FileMetaData).
    A file pageindex indexed keeps its original file, footer included, before them: the region
    then starts where the marker's original_length says the original ends.
    """
    path = Path(path)
    md = pq.ParquetFile(path).metadata
    data_end = 0
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        for j in range(rg.num_columns):
            cc = rg.column(j)
            begin = cc.data_page_offset
            if cc.has_dictionary_page and cc.dictionary_page_offset is not None:
                begin = min(begin, cc.dictionary_page_offset)
            data_end = max(data_end, begin + cc.total_compressed_size)
    size = path.stat().st_size
    with path.open("rb") as fh:
        fh.seek(size - 8)
        footer_len = struct.unpack("<I", fh.read(4))[0]
        magic = fh.read(4)
    if magic != b"PAR1":
        raise ValueError(f"{path}: not a plaintext-footer Parquet file")
    marker = (md.metadata or {}).get(b"pageindex", b"").decode()
    original = [int(v) for k, _, v in (f.partition("=") for f in marker.split(";")) if k == "original_length"]
    return max([data_end, *original]), size - 8 - footer_len


def corrupt_first_page_min(src: str | Path, dst: str | Path, base: int) -> Path:
    """Copy ``src`` to ``dst`` with the ColumnIndex min of the page whose min is ``base`` raised to base+1.

    The trick: ``src`` must be a one-int64-column file (see ``write_sorted_int_file``) whose smallest
    value ``base`` has a distinctive 8-byte little-endian pattern (e.g. 0x1122334455667788).  That
    pattern also occurs in the data pages and the footer statistics, but in the *tail region* between
    the last data page and the footer (see ``tail_region``) it can only be the ``min_values`` entry of
    the ColumnIndex (the OffsetIndex holds no values).  Overwriting those 8 bytes in place keeps every
    Thrift length and offset valid, so the file still reads, but the index now claims a min that is
    larger than the page's first value.
    """
    src, dst = Path(src), Path(dst)
    data = bytearray(src.read_bytes())
    start, end = tail_region(src)
    needle = struct.pack("<q", base)
    region = bytes(data[start:end])
    hits = region.count(needle)
    if hits != 1:
        raise AssertionError(f"expected exactly one {needle.hex()} in the index region, found {hits}")
    pos = start + region.index(needle)
    data[pos : pos + 8] = struct.pack("<q", base + 1)
    dst.write_bytes(bytes(data))
    return dst
