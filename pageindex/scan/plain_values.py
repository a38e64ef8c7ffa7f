"""Plain values: the values section of a PLAIN page of a fixed-width number column, read in place.

PLAIN stores such values as their little-endian bytes, so numpy reads them without an Arrow decode.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from pageindex.errors import MalformedFileError
from pageindex.format.compression import decompress
from pageindex.format.parquet_thrift import Encoding, Type
from pageindex.scan.page_levels import ValueSection

# The Arrow types a synthesized file of physical types only decodes these to.
ARROW_TYPES = {Type.INT32: pa.int32(), Type.INT64: pa.int64(), Type.FLOAT: pa.float32(), Type.DOUBLE: pa.float64()}


def readable(physical_type: int, section: ValueSection) -> bool:
    """Whether the section can be read here. A v2 section said to be stored uncompressed must
    also have its declared size, or it is left to Arrow's handling of such writer quirks."""
    return (section.encoding == Encoding.PLAIN and physical_type in ARROW_TYPES
            and (section.compressed or len(section.data) == section.uncompressed_size))


def plain_values(physical_type: int, codec: int, section: ValueSection) -> pa.Array:
    """The section's `count` values (bytes past them are ignored, as Arrow ignores them)."""
    arrow_type = ARROW_TYPES[physical_type]
    data = section.data
    if section.compressed:
        data = decompress(codec, data, section.uncompressed_size)
    width = arrow_type.bit_width // 8
    if len(data) < section.count * width:
        raise MalformedFileError(
            f"PLAIN page holds {len(data)} value bytes, too few for {section.count} values")
    values = np.frombuffer(data, dtype=np.uint8, count=section.count * width)
    return pa.Array.from_buffers(arrow_type, section.count, [None, pa.py_buffer(values)])
