"""Hand-encoded v1 data pages put in place of a one-column pyarrow file's only column chunk.

For files no current writer makes: pages split inside a record, header statistics that are out of
range or undecodable. Only pageindex.format.thrift is used to build them.
"""
from __future__ import annotations

import struct

from pageindex.format.thrift import Field, Struct, T, TList, decode_struct, encode_struct

_DATA_PAGE, _PLAIN, _RLE = 0, 0, 3


def data_page(num_values: int, body: bytes, stats: Struct) -> bytes:
    """An uncompressed v1 data page (PLAIN values, RLE levels) with these header statistics."""
    header = Struct((
        Field(1, T.I32, _DATA_PAGE), Field(2, T.I32, len(body)), Field(3, T.I32, len(body)),
        Field(5, T.STRUCT, Struct((Field(1, T.I32, num_values), Field(2, T.I32, _PLAIN),
                                   Field(3, T.I32, _RLE), Field(4, T.I32, _RLE), Field(5, T.STRUCT, stats)))),
    ))
    return encode_struct(header) + body


def with_only_chunk(data: bytes, chunk: bytes) -> bytes:
    """`data` (an uncompressed one-column, one-row-group file without a dictionary or page index)
    with its column chunk replaced by `chunk`, and its footer saying so."""
    (length,) = struct.unpack("<I", data[-8:-4])
    metadata, _ = decode_struct(data[-8 - length : -8])
    (group,) = metadata.get(4).items
    (column,) = group.get(1).items
    meta = (column.get(3).without(11).set(9, T.I64, 4)
            .set(6, T.I64, len(chunk)).set(7, T.I64, len(chunk)))
    column = column.set(2, T.I64, 4).set(3, T.STRUCT, meta)
    group = group.set(1, T.LIST, TList(T.STRUCT, (column,))).set(2, T.I64, len(chunk))
    footer = encode_struct(metadata.set(4, T.LIST, TList(T.STRUCT, (group,))))
    return b"PAR1" + chunk + footer + struct.pack("<I", len(footer)) + b"PAR1"
