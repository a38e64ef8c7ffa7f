"""pageindex.index.truncation: truncated bounds stay valid bounds, short, and UTF-8 where the value was."""
from __future__ import annotations

import random

import pytest

from pageindex.index.truncation import truncate_max, truncate_min


def is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


# ------------------------------------------------------------------ fixed examples

def test_short_values_untouched():
    for v in (b"", b"a", b"abc", b"\xff" * 3, "é".encode()):
        assert truncate_min(v, 3) is v or truncate_min(v, 3) == v
        assert truncate_max(v, 3) == v
    v = b"x" * 64
    assert truncate_min(v, 64) == v and truncate_max(v, 64) == v


def test_ascii():
    assert truncate_min(b"abcdef", 3) == b"abc"
    assert truncate_max(b"abcdef", 3) == b"abd"


def test_byte_carry():
    assert truncate_max(b"ab\xff\xffzz", 4) == b"ac\x00\x00"
    assert truncate_max(b"\x00\xff\x01", 2) == b"\x01\x00"


def test_all_ff_kept_whole():
    v = b"\xff" * 100
    assert truncate_max(v, 64) == v
    assert truncate_min(v, 64) == b"\xff" * 64


def test_multibyte_char_at_the_cut():
    v = ("a" + "é" * 40).encode()  # 'a' then 2-byte chars: byte 64 splits a char
    mn, mx = truncate_min(v, 64), truncate_max(v, 64)
    assert mn == ("a" + "é" * 31).encode() and len(mn) == 63
    assert mx == ("a" + "é" * 30 + "ê").encode()


def test_three_and_four_byte_chars():
    v = ("€" * 30).encode()  # 3 bytes each, 90 bytes
    assert truncate_min(v, 64) == ("€" * 21).encode()
    assert truncate_max(v, 64) == ("€" * 20 + "\u20ad").encode()
    v = ("😀" * 20).encode()  # 4 bytes each
    assert truncate_min(v, 10) == ("😀" * 2).encode()
    assert truncate_max(v, 10) == ("😀" + "😁").encode()


def test_max_code_point_cannot_be_incremented():
    v = ("\U0010FFFF" * 30).encode()
    assert truncate_max(v, 64) == v  # no same-width successor anywhere: kept whole
    assert truncate_min(v, 64) == ("\U0010FFFF" * 16).encode()
    v = ("a" + "\U0010FFFF" * 30).encode()
    assert truncate_max(v, 64) == b"b"  # the last char that can grow is 'a'


@pytest.mark.parametrize("char,expected_prefix_bump", [
    ("\ud7ff", "b"),  # +1 would be a surrogate: skip to the previous char
    ("\u007f", "b"),  # +1 would need 2 bytes
    ("\u07ff", "b"),  # +1 would need 3 bytes
    ("\uffff", "b"),  # +1 would need 4 bytes
])
def test_increment_skips_surrogates_and_width_changes(char, expected_prefix_bump):
    v = ("a" + char * 40).encode()
    width = len(char.encode())
    length = 1 + width * 10
    mx = truncate_max(v, length)
    assert mx == expected_prefix_bump.encode()
    assert mx > v and is_utf8(mx)


def test_char_before_surrogate_range_in_middle():
    v = ("x\ud7fe" + "z" * 100).encode()
    mx = truncate_max(v, 4)  # prefix 'x' + U+D7FE (4 bytes); U+D7FF is fine
    assert mx == "x\ud7ff".encode()


def test_invalid_utf8_uses_bytes():
    v = b"\xc3(" + b"a" * 100  # invalid UTF-8
    assert truncate_min(v, 10) == v[:10]
    assert truncate_max(v, 10) == v[:9] + b"b"


def test_first_char_longer_than_length():
    v = ("😀" * 5).encode()
    mn, mx = truncate_min(v, 2), truncate_max(v, 2)
    # no UTF-8 prefix fits: byte-wise bounds are still valid bounds
    assert v.startswith(mn) and len(mn) <= 2
    assert mx >= v and len(mx) <= 2


# ------------------------------------------------------------------ property tests

_ALPHABET = ["a", "z", "\x00", "\x7f", "\x80", "é", "\u07ff", "\u0800", "€", "\ud7ff", "\ue000",
             "\uffff", "\U00010000", "😀", "\U0010FFFF"]


def _random_value(rng: random.Random) -> tuple[bytes, bool]:
    kind = rng.random()
    n = rng.randint(0, 40)
    if kind < 0.45:
        return "".join(rng.choice(_ALPHABET) for _ in range(n)).encode(), True
    if kind < 0.6:
        return b"\xff" * n + bytes(rng.randrange(256) for _ in range(rng.randint(0, 3))), False
    if kind < 0.7:
        return bytes(rng.choice([0, 0xFE, 0xFF]) for _ in range(n)), False
    return bytes(rng.randrange(256) for _ in range(n)), False


def test_property_bounds():
    rng = random.Random(4243)
    kept_whole = 0
    for _ in range(20_000):
        v, _ = _random_value(rng)
        length = rng.randint(1, 24)
        mn, mx = truncate_min(v, length), truncate_max(v, length)
        assert mn <= v <= mx, (v, length)
        assert v.startswith(mn)
        assert len(mn) <= length or mn == v
        if len(mx) > length:
            assert mx == v  # only kept whole when no shorter upper bound exists
            kept_whole += 1
        if len(v) <= length:
            assert mn == v and mx == v
        if is_utf8(v) and length >= 4:
            assert is_utf8(mn), (v, length)
            assert is_utf8(mx), (v, length)
            # a prefix that ends on a character boundary and keeps as many as fit
            assert len(mn) > length - 4 or mn == v
    assert kept_whole > 0


def test_property_kept_whole_only_when_necessary():
    """When truncate_max keeps the value whole, no byte string of <= length bytes that is >= v
    exists with the same prefix rule: every byte of the prefix is 0xFF (or, for UTF-8, every
    character of the prefix is at the top of its width)."""
    rng = random.Random(99)
    for _ in range(5000):
        v, _ = _random_value(rng)
        length = rng.randint(1, 12)
        mx = truncate_max(v, length)
        if len(v) > length and mx == v:
            if not is_utf8(v):
                assert v[:length] == b"\xff" * length
            else:
                prefix = v[:length]
                text = prefix.decode("utf-8", "ignore")
                for ch in text:
                    nxt = ord(ch) + 1
                    assert (nxt > 0x10FFFF or 0xD800 <= nxt <= 0xDFFF
                            or len(chr(nxt).encode("utf-8", "surrogatepass")) != len(ch.encode()))


def test_property_order_preserving():
    """If a <= b then trunc_min(a) <= b and a <= trunc_max(b). (Truncation is NOT monotonic in
    general: a UTF-8-aware cut may keep fewer bytes of a larger value, which is why boundary_order
    is computed on the stored bounds.)"""
    rng = random.Random(7)
    for _ in range(5000):
        a, _ = _random_value(rng)
        b, _ = _random_value(rng)
        a, b = min(a, b), max(a, b)
        length = rng.randint(1, 16)
        assert truncate_min(a, length) <= b
        assert a <= truncate_max(b, length)
