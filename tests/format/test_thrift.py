"""pageindex.format.thrift: compact-protocol codec round trips, unknown fields, hardening and fuzzing."""
from __future__ import annotations

import dataclasses
import random
import struct
import time

import pytest

from pageindex.errors import PageIndexError, ThriftDecodeError, ThriftTruncatedError
from pageindex.format.footer import decode_footer
from pageindex.format.thrift import (
    MAX_DEPTH,
    Field,
    Struct,
    T,
    TList,
    TMap,
    decode_struct,
    encode_struct,
)
from tests.helpers.corpus import corpus_path, corpus_rows
from tests.helpers.thrift_trees import rebuilt

VALID = [corpus_path(r) for cat in ("candidate", "oracle") for r in corpus_rows(cat)]


def footer_bytes(path) -> bytes:
    data = path.read_bytes()
    (n,) = struct.unpack("<I", data[-8:-4])
    return data[-8 - n : -8]


@pytest.fixture(scope="module")
def footers() -> dict[str, bytes]:
    return {p.name: footer_bytes(p) for p in VALID}


# ------------------------------------------------------------------ round trips

@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_corpus_footer_round_trips_byte_identically(path):
    raw = footer_bytes(path)
    decoded, end = decode_struct(raw)
    assert end == len(raw)
    assert encode_struct(rebuilt(decoded)) == raw  # every writer's footer here is canonical
    assert encode_struct(decoded) == raw
    # decoding at an offset inside a larger buffer gives the same tree and end position
    padded = b"xyz" + raw + b"junk"
    again, end2 = decode_struct(padded, 3, 3 + len(raw))
    assert again == decoded and end2 == 3 + len(raw)


def _every_type_struct() -> Struct:
    """A struct exercising every compact type, nested containers included."""
    inner = Struct((Field(1, T.I32, -7), Field(2, T.BINARY, b"in"), Field(3, T.TRUE, False)))
    uuid = bytes(range(16))
    return Struct((
        Field(1, T.TRUE, True),
        Field(2, T.TRUE, False),
        Field(3, T.BYTE, -128),
        Field(4, T.I16, -32768),
        Field(5, T.I32, 2**31 - 1),
        Field(6, T.I64, -(2**63)),
        Field(7, T.DOUBLE, -1.5e300),
        Field(8, T.BINARY, b"\x00\xffbin"),
        Field(9, T.UUID, uuid),
        Field(10, T.STRUCT, inner),
        Field(11, T.LIST, TList(T.I64, tuple(range(-20, 20)))),  # long-form list header
        Field(12, T.LIST, TList(T.TRUE, (True, False, True))),
        Field(13, T.LIST, TList(T.DOUBLE, (0.0, -0.0, 1e-300))),
        Field(14, T.LIST, TList(T.UUID, (uuid, uuid[::-1]))),
        Field(15, T.LIST, TList(T.STRUCT, (inner, Struct()))),
        Field(16, T.LIST, TList(T.LIST, (TList(T.BINARY, (b"a", b"")), TList(T.I32, ())))),
        Field(17, T.SET, TList(T.I32, (1, 2, 3), is_set=True)),
        Field(18, T.MAP, TMap(T.BINARY, T.STRUCT, ((b"k", inner), (b"", Struct())))),
        Field(19, T.MAP, TMap(T.BINARY, T.BINARY, ())),
        Field(20, T.MAP, TMap(T.I32, T.LIST, ((1, TList(T.TRUE, (False,))),))),
        Field(21, T.LIST, TList(T.MAP, (TMap(T.BYTE, T.I16, ((1, 2),)),))),
    ))


def test_every_type_round_trips():
    s = _every_type_struct()
    raw = encode_struct(s)
    back, end = decode_struct(raw)
    assert end == len(raw)
    assert back == s
    assert encode_struct(rebuilt(back)) == raw


def test_unknown_fields_of_every_type_survive_in_a_real_footer(footers):
    raw = footers["alltypes_tiny_pages.parquet"]
    meta, _ = decode_struct(raw)
    unknown = _every_type_struct()
    # id 200 of every type, at the top level and inside the first ColumnChunk and its metadata
    extra = [Field(200 + i, f.type, f.value) for i, f in enumerate(unknown.fields)]
    for f in extra:
        meta = meta.set(f.id, f.type, f.value)
    rgs = meta.get(4)
    rg0 = rgs.items[0]
    cc0 = rg0.get(1).items[0]
    cc0 = cc0.set(200, T.STRUCT, unknown).set(201, T.LIST, TList(T.STRUCT, (unknown,)))
    cc0 = cc0.set(3, T.STRUCT, cc0.get(3).set(200, T.MAP, TMap(T.I32, T.STRUCT, ((5, unknown),))))
    rg0 = rg0.set(1, T.LIST, TList(T.STRUCT, (cc0,) + rg0.get(1).items[1:]))
    meta = meta.set(4, T.LIST, TList(T.STRUCT, (rg0,) + rgs.items[1:]))
    encoded = encode_struct(meta)  # the unchanged subtrees' bytes reused around the new ones
    back, end = decode_struct(encoded)
    assert end == len(encoded) and back == meta
    assert encode_struct(rebuilt(meta)) == encoded
    # The footer decoder accepts and keeps them.
    data_end = corpus_path("parquet-testing/data/alltypes_tiny_pages.parquet").stat().st_size - len(raw) - 8
    footer = decode_footer(encoded, data_end + len(encoded) + 8, "mem")
    assert footer.metadata.get(200) is True
    assert footer.metadata.get(200 + 17) == unknown.get(18)


def test_field_id_deltas_and_long_form():
    # ids that need the long form (delta > 15, decreasing, negative) survive
    s = Struct((Field(1, T.I32, 1), Field(40, T.I32, 2), Field(3, T.I32, 3), Field(-5, T.I32, 4),
                Field(32767, T.TRUE, True)))
    raw = encode_struct(s)
    assert decode_struct(raw)[0] == s


# ------------------------------------------------------------------ the bytes a struct was decoded from

def test_decoded_structs_keep_their_bytes_and_new_ones_do_not():
    inner = Struct((Field(1, T.I64, 300), Field(2, T.BINARY, b"x")))
    raw = encode_struct(Struct((Field(1, T.STRUCT, inner), Field(2, T.LIST, TList(T.STRUCT, (inner,))))))
    back = decode_struct(b"pad" + raw, 3)[0]
    assert back.raw == raw and back.get(1).raw == encode_struct(inner) == back.get(2).items[0].raw
    assert type(back.raw) is bytes and type(decode_struct(memoryview(raw))[0].raw) is bytes
    assert inner.raw is None and back.get(1) == inner and hash(back.get(1)) == hash(inner)
    assert repr(back.get(1)) == repr(inner)
    for new in (back.set(3, T.I32, 1), back.set(1, T.STRUCT, inner), back.without(2), back.without(),
                dataclasses.replace(back), dataclasses.replace(back, fields=back.fields[:1])):
        assert new.raw is None
        assert decode_struct(encode_struct(new))[0] == new


def test_unchanged_structs_keep_a_writer_s_own_encoding():
    """A writer's non-canonical encoding (here a field id in long form and a padded varint, both
    legal) is kept for the structs left unchanged, and written canonically once changed."""
    inner = b"\x06\x04\x80\x00\x00"  # field 2 (long form), i64 0 in two bytes
    raw = b"\x1c" + inner + b"\x15\x04\x00"  # field 1: that struct; field 2: i32 2
    tree = decode_struct(raw)[0]
    assert tree == Struct((Field(1, T.STRUCT, Struct((Field(2, T.I64, 0),))), Field(2, T.I32, 2)))
    assert encode_struct(tree) == raw
    changed = tree.set(2, T.I32, 3)
    assert encode_struct(changed) == b"\x1c" + inner + b"\x15\x06\x00"
    assert encode_struct(rebuilt(changed)) == b"\x1c\x26\x00\x00\x15\x06\x00"


# ------------------------------------------------------------------ Struct.set / without

def test_struct_set_replaces_in_place_and_inserts_in_order():
    s = Struct((Field(5, T.I32, 5), Field(2, T.I32, 2), Field(9, T.I32, 9)))  # out-of-order file
    r = s.set(2, T.I64, 20)
    assert [f.id for f in r.fields] == [5, 2, 9] and r.fields[1] == Field(2, T.I64, 20)
    assert s.get(2) == 2  # immutable: original untouched
    assert [f.id for f in s.set(7, T.I32, 7).fields] == [5, 2, 7, 9]  # before the first larger id
    assert [f.id for f in s.set(1, T.I32, 1).fields] == [1, 5, 2, 9]
    assert [f.id for f in s.set(10, T.I32, 10).fields] == [5, 2, 9, 10]
    assert [f.id for f in Struct().set(3, T.I32, 3).fields] == [3]


def test_struct_set_bool_normalizes_type():
    s = Struct().set(1, T.FALSE, False).set(2, T.TRUE, True)
    assert s.fields[0] == Field(1, T.TRUE, False)
    assert decode_struct(encode_struct(s))[0] == s


def test_struct_without_and_accessors():
    s = Struct((Field(1, T.I32, 1), Field(2, T.I32, 2), Field(3, T.I32, 3)))
    assert [f.id for f in s.without(1, 3).fields] == [2]
    assert s.without(42) == s
    assert s.without() == s
    assert s.has(2) and not s.has(4)
    assert s.get(4, "dflt") == "dflt"


# ------------------------------------------------------------------ hardening

def test_every_prefix_is_truncated(footers):
    raw = footers["int32_with_null_pages.parquet"]
    assert len(raw) < 2000
    for n in range(len(raw)):
        with pytest.raises(ThriftTruncatedError):
            decode_struct(raw[:n])
    # end bounds the read even when the buffer goes on
    with pytest.raises(ThriftTruncatedError):
        decode_struct(raw, 0, len(raw) - 1)


def _nested_structs(n: int) -> bytes:
    return b"\x1c" * n + b"\x00" * (n + 1)  # field 1: struct, n times, then the STOPs


def _nested_lists(n: int) -> bytes:
    # field 1: list of 1 list ... innermost an empty list of i32
    return b"\x19" + b"\x19" * (n - 1) + b"\x05" + b"\x00"


def test_depth_limit():
    assert decode_struct(_nested_structs(MAX_DEPTH))[1] == 2 * MAX_DEPTH + 1
    with pytest.raises(ThriftDecodeError) as err:
        decode_struct(_nested_structs(MAX_DEPTH + 1))
    assert not isinstance(err.value, ThriftTruncatedError)
    assert "deeper" in str(err.value)
    decode_struct(_nested_lists(MAX_DEPTH))
    with pytest.raises(ThriftDecodeError, match="deeper"):
        decode_struct(_nested_lists(MAX_DEPTH + 1))
    # absurd depth: refused quickly, no RecursionError
    with pytest.raises(ThriftDecodeError):
        decode_struct(_nested_structs(200_000))


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@pytest.mark.parametrize("etype", [t for t in T if t not in (T.STOP,)])
def test_huge_list_claim_is_refused_without_allocating(etype):
    raw = bytes([0x19, 0xF0 | int(etype)]) + _varint(2**31) + b"\x00" * 4
    started = time.perf_counter()
    with pytest.raises(ThriftTruncatedError):
        decode_struct(raw)
    assert time.perf_counter() - started < 0.05


def test_huge_map_binary_and_short_list_claims():
    with pytest.raises(ThriftTruncatedError):
        decode_struct(b"\x1b" + _varint(2**31) + b"\x55" + b"\x00" * 4)  # map
    with pytest.raises(ThriftTruncatedError):
        decode_struct(b"\x18" + _varint(2**31) + b"ab")  # binary
    with pytest.raises(ThriftTruncatedError):
        decode_struct(b"\x19\xe5\x00")  # list header says 14 i32 elements, 1 byte left


def test_varint_too_long_and_out_of_range():
    with pytest.raises(ThriftDecodeError, match="too long"):
        decode_struct(b"\x15" + b"\xff" * 5 + b"\x01\x00")  # i32 uses at most 5 bytes
    with pytest.raises(ThriftDecodeError, match="too long"):
        decode_struct(b"\x16" + b"\xff" * 10 + b"\x01\x00")  # i64 at most 10
    with pytest.raises(ThriftDecodeError, match="too long"):
        decode_struct(b"\x14" + b"\xff" * 3 + b"\x01\x00")  # i16 at most 3
    with pytest.raises(ThriftDecodeError, match="out of range"):
        decode_struct(b"\x15" + _varint(2**32) + b"\x00")  # zigzag 2**32 -> 2**31 > i32 max
    with pytest.raises(ThriftDecodeError, match="too long"):
        decode_struct(b"\x18" + b"\x80" * 5 + b"\x01")  # binary length varint
    # the largest legal values decode
    assert decode_struct(b"\x16" + _varint(2**64 - 1) + b"\x00")[0].get(1) == -(2**63)


# Values at every varint length (1 to 10 bytes) and at the type's limits: the decoder reads short
# varints inline and longer ones through the checked path, in fields and in lists alike.
_EDGES = {T.I32: 31, T.I64: 63}


@pytest.mark.parametrize("ttype", list(_EDGES))
def test_ints_of_every_varint_length_in_fields_and_lists(ttype):
    bits = _EDGES[ttype]
    values = sorted({v for k in range(bits + 1) for v in (1 << k, -(1 << k), (1 << k) - 1, -(1 << k) + 1)
                     if -(1 << bits) <= v < (1 << bits)})
    s = Struct(tuple(Field(i + 1, ttype, v) for i, v in enumerate(values))
               + (Field(len(values) + 1, T.LIST, TList(ttype, tuple(values))),))
    raw = encode_struct(s)
    assert decode_struct(raw) == (s, len(raw))
    # the same bytes inside a larger buffer, bounded by end
    assert decode_struct(b"\x01" + raw + b"\x80", 1, 1 + len(raw)) == (s, 1 + len(raw))


@pytest.mark.parametrize("raw, error, match", [
    (b"\x19\x15" + _varint(2**32) + b"\x00", ThriftDecodeError, "out of range"),  # list<i32>
    (b"\x19\x15" + b"\xff" * 5 + b"\x01\x00", ThriftDecodeError, "too long"),
    (b"\x19\x16" + b"\xff" * 10 + b"\x01\x00", ThriftDecodeError, "too long"),  # list<i64>
    (b"\x19\x26\x02\xff\xff", ThriftTruncatedError, "ends early"),  # 2nd i64 cut off
    (b"\x19\x18\x05ab", ThriftTruncatedError, "exceeds"),  # list<binary>: length past the end
    (b"\x19\x18" + b"\x80" * 5 + b"\x01", ThriftDecodeError, "too long"),
    (b"\x16\xff\xff\xff", ThriftTruncatedError, "ends early"),  # i64 field cut off
])
def test_int_and_binary_errors_in_lists_and_fields(raw, error, match):
    with pytest.raises(error, match=match) as err:
        decode_struct(raw)
    assert error is ThriftTruncatedError or not isinstance(err.value, ThriftTruncatedError)


@pytest.mark.parametrize("raw", [
    b"\x1e\x00",  # field type 14
    b"\x1f\x00",  # field type 15
    b"\x19\x1e\x00",  # list element type 14
    b"\x19\x10\x00",  # list element type 0 (STOP)
    b"\x19\x1f\x00",  # list element type 15
    b"\x1b\x01\xe5\x00\x00",  # map key type 14
    b"\x1b\x01\x50\x00\x00",  # map value type 0
])
def test_invalid_types(raw):
    with pytest.raises(ThriftDecodeError) as err:
        decode_struct(raw)
    assert not isinstance(err.value, ThriftTruncatedError)


def test_empty_list_with_element_type_zero_is_accepted_losslessly():
    """fastparquet writes an empty list as the single byte 0x00 (size 0, element type 0); Apache
    Thrift's C++ and Java compact readers accept it. It must decode, and encode back unchanged."""
    raw = b"\x19\x00\x15\x04\x00"  # field 1: list 0x00; field 2: i32 2
    decoded, end = decode_struct(raw)
    assert end == len(raw)
    assert decoded.get(1) == TList(T.STOP, ())
    assert decoded.get(2) == 2
    assert encode_struct(rebuilt(decoded)) == raw
    # A non-empty list of element type 0 is still refused (test_invalid_types).


def test_errors_carry_offsets():
    with pytest.raises(ThriftDecodeError) as err:
        decode_struct(b"\x15\x02\x1e\x00")
    assert err.value.offset is not None and err.value.offset >= 2


# ------------------------------------------------------------------ fuzzing

def _mutate(rng: random.Random, raw: bytes) -> bytes:
    data = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        pos = rng.randrange(len(data)) if data else 0
        if op < 0.45 and data:
            data[pos] = rng.randrange(256)
        elif op < 0.6 and data:
            data[pos] ^= 1 << rng.randrange(8)
        elif op < 0.7:
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op < 0.8 and data:
            del data[pos : pos + rng.randint(1, 8)]
        elif op < 0.9:
            data[pos:pos] = rng.choice([b"\xff\xff\xff\xff\x0f", b"\xf9\xff\xff\xff\x07", b"\x1c" * 80,
                                        b"\x00", b"\xfb\xff\xff\xff\x0f"])
        else:
            data = data[: rng.randrange(len(data) + 1)]
    return bytes(data)


def test_fuzz_mutated_footers(footers):
    rng = random.Random(20240607)
    names = sorted(n for n, raw in footers.items() if len(raw) < 8_000)
    slowest = 0.0
    outcomes = {"ok": 0, "error": 0}
    for i in range(2000):
        raw = footers[rng.choice(names)]
        mutated = _mutate(rng, raw)
        started = time.thread_time()  # CPU time: what a hostile footer costs, not the machine's load
        try:
            tree, end = decode_struct(mutated)
            assert encode_struct(tree) == mutated[:end]
            anew = encode_struct(rebuilt(tree))  # and anew, stably (trees may hold NaN, so compare bytes)
            assert encode_struct(rebuilt(decode_struct(anew)[0])) == anew
            decode_footer(mutated[:end], end + 8 + rng.randrange(0, 10**6), "fuzz")
            outcomes["ok"] += 1
        except PageIndexError:
            outcomes["error"] += 1
        except Exception as exc:  # pragma: no cover - the failure we look for
            raise AssertionError(f"mutation {i}: {type(exc).__name__}: {exc} "
                                 f"(input {mutated[:64].hex()}...)") from exc
        slowest = max(slowest, time.thread_time() - started)
        assert slowest < 1.0, f"mutation {i} took {slowest:.2f}s"
    assert outcomes["error"] > 100  # the mutations really break things
