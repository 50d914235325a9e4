"""The Go-style parser: syntax forms Go's `flag` / pflag accept, value kinds, and what they reject.

Covers: `--f=v`, `--f v`, `-f=v`, `-f v`, `_` normalisation, bare and explicit booleans (every
`strconv.ParseBool` spelling), booleans never eating the next argument, `--`, interleaved positionals, last
occurrence wins, repeatable flags, help flags; Go integers, floats, durations, Prometheus durations,
quantities, and the float formatting help uses.
"""

from __future__ import annotations

import math

import pytest

from vpa.flags import parsing
from vpa.flags.parsing import FlagError, FlagSpec

SPECS = {
    spec.name: spec
    for spec in (
        FlagSpec("leader-elect", parsing.BOOL),
        FlagSpec("recommender-interval", parsing.DURATION),
        FlagSpec("history-length", parsing.PROMETHEUS_DURATION),
        FlagSpec("port", parsing.INT),
        FlagSpec("qps", parsing.FLOAT),
        FlagSpec("name", parsing.STRING),
        FlagSpec("cpu", parsing.CPU_QUANTITY),
        FlagSpec("memory", parsing.MEMORY_QUANTITY),
        FlagSpec("v", parsing.INT),
        FlagSpec("gates", parsing.STRING, repeatable=True),
    )
}


@pytest.mark.parametrize(
    ("argv", "values", "positionals"),
    [
        (["--port=8000"], {"port": 8000}, []),
        (["--port", "8000"], {"port": 8000}, []),
        (["-port=8000"], {"port": 8000}, []),
        (["-port", "8000"], {"port": 8000}, []),
        (["-v", "5"], {"v": 5}, []),
        (["-v=5"], {"v": 5}, []),
        (["--recommender_interval=2m"], {"recommender-interval": 120.0}, []),
        (["--name="], {"name": ""}, []),
        (["--name", "--port"], {"name": "--port"}, []),  # a value may start with a dash, as in Go
        (["--name=a=b"], {"name": "a=b"}, []),
        (["--port=1", "--port=2"], {"port": 2}, []),  # last wins
        (["--gates=a", "--gates", "b"], {"gates": ["a", "b"]}, []),
        (["TRACE", "--port=1", "more"], {"port": 1}, ["TRACE", "more"]),
        (["--port=1", "--", "--port=2", "-x"], {"port": 1}, ["--port=2", "-x"]),
        (["-"], {}, ["-"]),
        ([], {}, []),
    ],
    ids=[
        "double-dash-equals",
        "double-dash-space",
        "single-dash-equals",
        "single-dash-space",
        "v-space",
        "v-equals",
        "underscore-normalised",
        "empty-value",
        "value-looks-like-flag",
        "value-with-equals",
        "last-wins",
        "repeatable",
        "interleaved-positionals",
        "double-dash-ends-flags",
        "lone-dash-positional",
        "nothing",
    ],
)
def test_syntax_forms(argv: list[str], values: dict[str, object], positionals: list[str]) -> None:
    parsed = parsing.parse_go_flags(argv, SPECS)
    assert parsed.values == values
    assert parsed.positionals == positionals
    assert not parsed.help_requested


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--leader-elect"], True),
        (["-leader-elect"], True),
        *[([f"--leader-elect={text}"], True) for text in ("true", "1", "t", "T", "TRUE", "True")],
        *[([f"--leader-elect={text}"], False) for text in ("false", "0", "f", "F", "FALSE", "False")],
        (["--leader-elect", "--leader-elect=false"], False),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_booleans(argv: list[str], expected: bool) -> None:
    assert parsing.parse_go_flags(argv, SPECS).values["leader-elect"] is expected


def test_boolean_never_takes_the_next_argument() -> None:
    parsed = parsing.parse_go_flags(["--leader-elect", "false"], SPECS)
    assert parsed.values["leader-elect"] is True
    assert parsed.positionals == ["false"]


@pytest.mark.parametrize("argv", [["-h"], ["--help"], ["-help"], ["--port=1", "--help"]], ids=" ".join)
def test_help_flags(argv: list[str]) -> None:
    assert parsing.parse_go_flags(argv, SPECS).help_requested


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nope"], "unknown flag: --nope"),
        (["--nope=1"], 'unknown flag: --nope (in "--nope=1")'),
        (["-x"], "unknown flag: -x"),
        (["--no_pe"], "unknown flag: --no_pe"),
        (["--port"], "flag needs an argument: --port"),
        (["---port=1"], "bad flag syntax: ---port=1"),
        (["--=1"], "bad flag syntax: --=1"),
        (["--leader-elect=yes"], 'invalid value "yes" for flag --leader-elect: not a boolean'),
        (["--leader-elect="], 'invalid value "" for flag --leader-elect: not a boolean'),
        (["--port=abc"], 'invalid value "abc" for flag --port: not an integer'),
        (["--port="], 'invalid value "" for flag --port: not an integer'),
        (["--port=1.5"], 'invalid value "1.5" for flag --port: not an integer'),
        (
            ["--port=9223372036854775808"],
            'invalid value "9223372036854775808" for flag --port: value out of range',
        ),
        (["--qps=fast"], 'invalid value "fast" for flag --qps: not a number'),
        (
            ["--recommender-interval=abc"],
            'invalid value "abc" for flag --recommender-interval: not a duration',
        ),
        (["--recommender-interval=60"], 'invalid value "60" for flag --recommender-interval: missing unit'),
        (
            ["--recommender-interval=1d"],
            'invalid value "1d" for flag --recommender-interval: unknown unit "d"',
        ),
        (["--history-length=1.5d"], 'invalid value "1.5d" for flag --history-length: unknown unit "."'),
        (["--history-length=8"], 'invalid value "8" for flag --history-length: not a Prometheus duration'),
        (["--cpu=4x"], "invalid value \"4x\" for flag --cpu: quantity '4x' has an unknown suffix"),
        (["--memory=lots"], "invalid value \"lots\" for flag --memory: quantity 'lots' is not a number"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_rejections_name_flag_and_value(argv: list[str], message: str) -> None:
    with pytest.raises(FlagError) as caught:
        parsing.parse_go_flags(argv, SPECS)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10", 10),
        ("-5", -5),
        ("+5", 5),
        ("0", 0),
        ("0x1f", 31),
        ("0X1F", 31),
        ("017", 15),  # a leading zero is octal in Go
        ("0o17", 15),
        ("0b101", 5),
        ("1_000", 1000),
        ("0x_1f", 31),
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775808", -(2**63)),
    ],
    ids=str,
)
def test_go_int(text: str, expected: int) -> None:
    assert parsing.parse_go_int(text) == expected


@pytest.mark.parametrize(
    "text", ["", " 1", "1 ", "08", "1__0", "_1", "1_", "0x", "1e3", "1.0", "--1"], ids=repr
)
def test_go_int_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parsing.parse_go_int(text)


def test_go_uint() -> None:
    assert parsing.parse_go_uint("18446744073709551615") == 2**64 - 1
    for bad in ("-1", "+1", "18446744073709551616"):
        with pytest.raises(ValueError):
            parsing.parse_go_uint(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.15", 0.15),
        ("50", 50.0),
        ("-1", -1.0),
        (".5", 0.5),
        ("5.", 5.0),
        ("1e3", 1000.0),
        ("1.048576e+08", 104857600.0),
        ("0x1p-2", 0.25),
        ("Inf", math.inf),
        ("-infinity", -math.inf),
        ("1_000.5", 1000.5),  # Go float literals allow underscores between digits
        ("1e1_0", 1e10),
        ("0x_1p-2", 0.25),
    ],
    ids=str,
)
def test_go_float(text: str, expected: float) -> None:
    assert parsing.parse_go_float(text) == expected


@pytest.mark.parametrize(
    "text", ["", "abc", " 1", "_1", "1_", "1__0", "1_.5", "1e", "0x1", "1e400", "1,5"], ids=repr
)
def test_go_float_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parsing.parse_go_float(text)


def test_go_float_nan() -> None:
    assert math.isnan(parsing.parse_go_float("NaN"))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.15, "0.15"),
        (50.0, "50"),
        (-1.0, "-1"),
        (104857600.0, "1.048576e+08"),
        (1e6, "1e+06"),
        (100000.0, "100000"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (0.0, "0"),
    ],
    ids=str,
)
def test_float_printed_as_pflag_prints_it(value: float, expected: str) -> None:
    assert parsing.format_go_float(value) == expected


@pytest.mark.parametrize(
    ("argv", "name", "expected"),
    [
        (["--cpu=4"], "cpu", 4000),
        (["--cpu=500m"], "cpu", 500),
        (["--cpu=0.0001"], "cpu", 1),  # rounded up like MilliValue
        (["--memory=2Gi"], "memory", 2 * 1024**3),
        (["--memory=1.5k"], "memory", 1500),
        (["--memory=1e3"], "memory", 1000),
        (["--recommender-interval=12h"], "recommender-interval", 43200.0),
        (["--recommender-interval=1h30m"], "recommender-interval", 5400.0),
        (["--recommender-interval=1.5h"], "recommender-interval", 5400.0),
        (["--recommender-interval=300ms"], "recommender-interval", 0.3),
        (["--history-length=8d"], "history-length", 691200.0),
        (["--history-length=1w"], "history-length", 604800.0),
        (["--history-length=1y"], "history-length", 31536000.0),
        (["--history-length=0"], "history-length", 0.0),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_value_kinds(argv: list[str], name: str, expected: object) -> None:
    assert parsing.parse_go_flags(argv, SPECS).values[name] == expected


def test_choice_kind() -> None:
    kind = parsing.choice("tls1_2", "tls1_3")
    assert kind.parse("tls1_3") == "tls1_3"
    with pytest.raises(ValueError, match="must be one of tls1_2, tls1_3"):
        kind.parse("TLS1_3")
