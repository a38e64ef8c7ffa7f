"""Decompression of Parquet page bodies with pyarrow's codecs.

Every result has exactly the size the page header declares; anything else is a MalformedFileError.
"""
from __future__ import annotations

import pyarrow as pa

from pageindex.errors import MalformedFileError, UnsupportedFileError
from pageindex.format.parquet_thrift import CompressionCodec
from pageindex.format.thrift import uleb128

# LZ4 frame header: magic, FLG (version 1, independent blocks, no checksums, no content
# size), BD (4 MiB maximum block size), header checksum byte (xxh32 of FLG BD, bits 8..15).
_LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FRAME_HEADER = _LZ4_FRAME_MAGIC + b"\x60\x70\x73"
_LZ4_FRAME_END = b"\x00\x00\x00\x00"
_LZ4_FRAME_MAX_BLOCK = 4 << 20
_HADOOP_PREFIX = 8
# The most bytes one compressed byte can become, per codec (what its format can express at
# best): snappy's 3-byte copy of 64 bytes; deflate's 258-byte match in two bits; an LZ4 match
# length byte of 255; a zstd RLE block, 4 bytes for 128 KiB. Brotli has no such small bound.
_MAX_EXPANSION = {
    CompressionCodec.UNCOMPRESSED: 1,
    CompressionCodec.SNAPPY: 22,
    CompressionCodec.GZIP: 1032,
    CompressionCodec.LZ4: 256,
    CompressionCodec.LZ4_RAW: 256,
    CompressionCodec.ZSTD: 32768,
}


def check_expansion(codec: int, stored: int, claimed: int, offset: int | None = None) -> None:
    """Refuse a page whose `stored` bytes cannot decompress to the `claimed` size: a header that
    lies would otherwise have that much allocated before the codec finds out."""
    ratio = _MAX_EXPANSION.get(codec)
    if ratio is not None and claimed > max(stored, 0) * ratio:
        raise MalformedFileError(f"page claims {claimed} bytes from {stored} "
                                 f"{CompressionCodec.name(codec)} bytes, more than the codec can "
                                 "produce from them", offset=offset)


def decompress(codec: int, data: bytes | memoryview, uncompressed_size: int) -> bytes | memoryview:
    """Decompress a page body to exactly uncompressed_size bytes, never producing more; a
    codec's result is a view of the one buffer it decoded into (a big page is held once)."""
    if uncompressed_size < 0:
        raise MalformedFileError(f"negative uncompressed page size {uncompressed_size}")
    if codec == CompressionCodec.UNCOMPRESSED:
        if len(data) != uncompressed_size:
            raise MalformedFileError(
                f"uncompressed page has {len(data)} bytes, header says {uncompressed_size}"
            )
        return bytes(data)
    if codec == CompressionCodec.LZO:
        raise UnsupportedFileError("LZO compression is not supported")
    if codec not in CompressionCodec.NAMES:
        raise UnsupportedFileError(f"unknown compression codec {codec}")
    if uncompressed_size == 0 and len(data) == 0:
        # An empty section (such as the v2 values of an all-null page) may be stored as zero
        # bytes rather than as a compressed empty stream, which no codec would accept.
        return b""
    try:
        if codec == CompressionCodec.SNAPPY:
            return _snappy(data, uncompressed_size)
        if codec == CompressionCodec.GZIP:
            return _stream("gzip", data, uncompressed_size)
        if codec == CompressionCodec.BROTLI:
            return _stream("brotli", data, uncompressed_size)
        if codec == CompressionCodec.LZ4:
            return _lz4_any(data, uncompressed_size)
        if codec == CompressionCodec.ZSTD:
            # Arrow's one-shot ZSTD decode already fails unless it fills the buffer exactly.
            return _view(pa.Codec("zstd").decompress(data, uncompressed_size))
        return _lz4_block(data, uncompressed_size)
    except (OSError, pa.ArrowException) as exc:
        raise MalformedFileError(f"{CompressionCodec.name(codec)} decompression failed: {exc}") from exc


def _snappy(data: bytes | memoryview, size: int) -> memoryview:
    # pyarrow's one-shot decode discards the real output length, but snappy states it in a
    # varint preamble and verifies the stream against it.
    preamble = uleb128(data, 0, 5)
    if preamble is None:
        raise MalformedFileError("snappy length preamble is truncated or too long")
    declared = preamble[0]
    if declared != size:
        raise MalformedFileError(f"SNAPPY page declares {declared} bytes, header says {size}")
    return _view(pa.Codec("snappy").decompress(data, size))


def _view(buffer: pa.Buffer) -> memoryview:
    """The bytes of an Arrow buffer, unsigned, without a copy (its .to_pybytes() would be one)."""
    return memoryview(buffer).cast("B")


def _stream(codec: str, data: bytes | memoryview, size: int) -> memoryview:
    """Decode through pyarrow's streaming reader, which reports the true output length.

    The stream also accepts concatenated members (multi-member gzip) and rejects
    truncated input and trailing garbage. Reading size + 1 bytes caps the output.
    """
    with pa.CompressedInputStream(pa.BufferReader(data), codec) as stream:
        result = _view(stream.read_buffer(size + 1))
    if len(result) > size:
        raise MalformedFileError(f"{codec} page decompresses to more than {size} bytes")
    if len(result) < size:
        raise MalformedFileError(f"{codec} page decompressed to {len(result)} bytes, not {size}")
    return result


def _lz4_any(data: bytes | memoryview, size: int) -> bytes | memoryview:
    """LZ4 (the deprecated codec) as Arrow C++ reads it: Hadoop framing, else an LZ4 frame, else a raw block."""
    result = _lz4_hadoop(data, size)
    if result is not None:
        return result
    if bytes(data[:4]) == _LZ4_FRAME_MAGIC:
        try:
            return _stream("lz4", data, size)
        except (MalformedFileError, OSError, pa.ArrowException):
            pass
    return _lz4_block(data, size)


def _lz4_hadoop(data: bytes | memoryview, size: int) -> bytes | None:
    """Hadoop's LZ4 framing, or None when the data does not parse exactly as such."""
    view = memoryview(data)
    parts: list[bytes] = []
    pos, produced = 0, 0
    while len(view) - pos >= _HADOOP_PREFIX:
        block_size = int.from_bytes(view[pos : pos + 4], "big")
        compressed_size = int.from_bytes(view[pos + 4 : pos + 8], "big")
        pos += _HADOOP_PREFIX
        if compressed_size > len(view) - pos or block_size > size - produced:
            return None
        try:
            parts.append(_lz4_block(view[pos : pos + compressed_size], block_size))
        except (MalformedFileError, OSError, pa.ArrowException):
            return None
        pos += compressed_size
        produced += block_size
    if pos != len(view) or produced != size:
        return None
    return b"".join(parts)


def _lz4_block(data: bytes | memoryview, size: int) -> memoryview:
    """A raw LZ4 block that must decode to exactly size bytes."""
    if size <= _LZ4_FRAME_MAX_BLOCK and len(data) <= _LZ4_FRAME_MAX_BLOCK:
        # pyarrow's one-shot decode discards the real output length; wrapped as a one-block
        # LZ4 frame, the streaming reader reports it exactly.
        frame = b"".join(
            (_LZ4_FRAME_HEADER, len(data).to_bytes(4, "little"), data, _LZ4_FRAME_END)
        )
        return _stream("lz4", frame, size)
    # Too big for a frame block. Decoding into size bytes proves the output is at most
    # size; failing with size - 1 shows it is not shorter, as LZ4 never writes past the
    # end. Only a malformed block that breaks LZ4's end-of-block margins (last 12 bytes)
    # could still pass short; frames rule that out for blocks up to 4 MiB.
    codec = pa.Codec("lz4_raw")
    result = _view(codec.decompress(data, size))
    try:
        codec.decompress(data, size - 1, asbytes=True)
    except (OSError, pa.ArrowException):
        return result
    raise MalformedFileError(f"LZ4 block decompressed to fewer than {size} bytes")
