"""Quantity parsing, exact integer views and canonical printing, against apimachinery's behaviour."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vpa.model import quantity
from vpa.model.quantity import Quantity, QuantityError

# (input, canonical string, millis (MilliValue), value (Value))
PARSE_TABLE = [
    ("100m", "100m", 100, 1),
    ("0.1", "100m", 100, 1),
    ("1", "1", 1000, 1),
    ("1e3", "1e3", 1_000_000, 1000),
    ("1E3", "1e3", 1_000_000, 1000),
    ("129e6", "129e6", 129_000_000_000, 129_000_000),
    ("129M", "129M", 129_000_000_000, 129_000_000),
    ("1Ki", "1Ki", 1_024_000, 1024),
    ("1.5Gi", "1536Mi", 1_610_612_736_000, 1_610_612_736),
    ("2.5", "2500m", 2500, 3),
    ("-1", "-1", -1000, -1),
    ("+1", "1", 1000, 1),
    # Below a millicore: MilliValue rounds up, as the kubelet and VPA see it.
    ("0.0001", "100u", 1, 1),
    ("-0.0001", "-100u", -1, -1),
    ("0.0000000001", "1n", 1, 1),  # below nano precision: rounded up to 1n
    ("1.5k", "1500", 1_500_000, 1500),
    ("2000", "2k", 2_000_000, 2000),
    ("1500m", "1500m", 1500, 2),
    ("1e4", "10e3", 10_000_000, 10_000),
    ("0.5Ki", "512", 512_000, 512),  # binary below 1024 prints as decimal
    ("1.0001Ki", "1024102400u", 1_024_103, 1025),  # fractional binary prints as decimal
    ("1E", "1E", 10**21, 10**18),
    (".5", "500m", 500, 1),
    ("1.", "1", 1000, 1),
    ("0", "0", 0, 0),
    ("00100m", "100m", 100, 1),
    ("262144k", "262144k", 262_144_000_000, 262_144_000),
    # Very large values are capped at 2^63-1 like apimachinery's maxAllowed.
    ("8Ei", "9223372036854775807", (2**63 - 1) * 1000, 2**63 - 1),
    ("12345678901234567890", "9223372036854775807", (2**63 - 1) * 1000, 2**63 - 1),
    ("1e100", "9223372036854775807", (2**63 - 1) * 1000, 2**63 - 1),
    ("4Ei", "4Ei", 4 * 2**60 * 1000, 4 * 2**60),
]


@pytest.mark.parametrize(
    ("text", "canonical", "millis", "value"), PARSE_TABLE, ids=[r[0] for r in PARSE_TABLE]
)
def test_parse_table(text: str, canonical: str, millis: int, value: int) -> None:
    q = Quantity.parse(text)
    assert q.canonical() == canonical
    assert str(q) == canonical
    assert q.millis == millis
    assert q.value == value


GARBAGE = [
    ("abc", "not a number"),
    ("1.2.3", "unknown suffix '.3'"),
    ("5XB", "unknown suffix 'XB'"),
    ("", "empty"),
    ("-", "not a number"),
    (".", "not a number"),
    ("1e", "unknown suffix 'e'"),
    ("1Kii", "unknown suffix 'Kii'"),
    (" 1", "not a number"),
    ("1 ", "unknown suffix ' '"),
    ("1mi", "unknown suffix 'mi'"),
    ("0x10", "unknown suffix 'x10'"),
]


@pytest.mark.parametrize(("text", "message"), GARBAGE, ids=[repr(g[0]) for g in GARBAGE])
def test_garbage_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(QuantityError) as info:
        Quantity.parse(text)
    assert message in str(info.value)
    if text:
        assert repr(text) in str(info.value)


def test_equality_ignores_format() -> None:
    assert Quantity.parse("1Ki") == Quantity.parse("1024")
    assert Quantity.parse("1k") == Quantity.parse("1e3")
    assert hash(Quantity.parse("1Gi")) == hash(Quantity.parse("1073741824"))
    assert Quantity.parse("999m") < Quantity.parse("1")
    assert Quantity.parse("2") >= Quantity.parse("2000m")


@pytest.mark.parametrize(
    ("millicores", "expected"),
    [(250, "250m"), (1000, "1"), (1500, "1500m"), (2000, "2"), (0, "0"), (25, "25m"), (100_000, "100")],
    ids=str,
)
def test_format_cpu(millicores: int, expected: str) -> None:
    assert quantity.format_cpu_millicores(millicores) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1_073_741_824, "1Gi"), (1000, "1k"), (1536, "1536"), (262_144_000, "250Mi"), (100 * 2**20, "100Mi")],
    ids=str,
)
def test_format_memory_binary(value: int, expected: str) -> None:
    assert quantity.format_memory_bytes(value) == expected


def test_helpers() -> None:
    assert quantity.cpu_millicores("0.0001") == 1
    assert quantity.memory_bytes("1Gi") == 2**30
    with pytest.raises(QuantityError):
        quantity.cpu_millicores("lots")


@given(
    st.integers(min_value=-(2**62), max_value=2**62),
    st.sampled_from(["DecimalSI", "BinarySI", "DecimalExponent"]),
)
def test_canonical_round_trips(nanos: int, fmt: quantity.Format) -> None:
    q = Quantity(nanos, fmt)
    again = Quantity.parse(q.canonical())
    assert again == q


@given(st.integers(min_value=0, max_value=10**12))
def test_millicores_round_trip(millicores: int) -> None:
    assert quantity.cpu_millicores(quantity.format_cpu_millicores(millicores)) == millicores


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: Quantity.from_int(10**21), "1000E"),
        (lambda: Quantity.from_int(-(10**24)), "-1000000E"),
        (lambda: Quantity.from_int(quantity.MAX_VALUE), "9223372036854775807"),
        (lambda: Quantity.from_int(10**21, "DecimalExponent"), "1e21"),
        (lambda: Quantity.from_millis(10**25), "10000E"),
        (lambda: Quantity.from_int(3 * 2**70, "BinarySI"), "3072Ei"),
    ],
    ids=["1e21", "-1e24", "max", "exponent form", "1e25 millicores", "past Ei"],
)
def test_quantities_past_the_largest_suffix_format(make: Callable[[], Quantity], expected: str) -> None:
    assert make().canonical() == expected


@given(
    st.integers(min_value=-quantity.MAX_VALUE * quantity.NANO, max_value=quantity.MAX_VALUE * quantity.NANO),
    st.sampled_from(["DecimalSI", "BinarySI", "DecimalExponent"]),
)
def test_every_representable_quantity_formats_and_round_trips(nanos: int, fmt: quantity.Format) -> None:
    q = Quantity(nanos, fmt)
    assert Quantity.parse(q.canonical()) == q


@given(st.integers(min_value=0, max_value=10**40))
def test_byte_and_millicore_formatting_never_fails(amount: int) -> None:
    memory = quantity.format_memory_bytes(amount)
    cpu = quantity.format_cpu_millicores(amount)
    assert Quantity.parse(memory).value == min(amount, quantity.MAX_VALUE)
    assert Quantity.parse(cpu).millis == min(amount, quantity.MAX_VALUE * 1000)


@pytest.mark.parametrize(
    ("amount", "ok"),
    [(-1, False), (0, True), (1, True), (quantity.MAX_VALUE, True), (quantity.MAX_VALUE + 1, False)],
    ids=str,
)
def test_in_pod_range(amount: int, ok: bool) -> None:
    assert quantity.in_pod_range(amount) is ok


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("256Mi", "256Mi"),  # upstream patches keep the recommendation's binary form
        ("1Gi", "1Gi"),
        ("279172665", "279172665"),  # not a multiple of 1024: plain bytes
        ("300M", "300M"),  # a decimal recommendation stays decimal
        ("2G", "2G"),  # a multiple of 1024, but "1953125Ki" is not how it was written
        ("4k", "4k"),
        ("0", "0"),
    ],
)
def test_memory_patch_text_keeps_the_recommendation_form(written: str, expected: str) -> None:
    from vpa.model.quantity import format_memory_bytes_as_written, memory_bytes
    from vpa.model.resources import MEMORY, format_patch_amount

    assert format_memory_bytes_as_written(memory_bytes(written)) == expected
    assert format_patch_amount(MEMORY, memory_bytes(written)) == expected
