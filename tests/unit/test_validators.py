"""``weir._util.positive_int`` / ``positive_float``: one validator for every count and duration option.

The constructors below validate their options before they connect to anything, so no server runs.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path
from typing import Any

import pytest

from weir._util import positive_float
from weir.connectors.memcached.maps import MemcachedMapState
from weir.connectors.nats.spout import NatsSpout
from weir.connectors.redis.spout import RedisStreamSpout
from weir.connectors.sqlite.connection import check_options
from weir.errors import ConfigError

SRC = Path(__file__).resolve().parents[2] / "src" / "weir"


@pytest.mark.parametrize("value", [1, 0.5, 3.0, 10**9])
def test_positive_float_accepts_finite_positive_numbers_as_floats(value: Any) -> None:
    got = positive_float(value, "timeout")
    assert got == float(value) and type(got) is float


@pytest.mark.parametrize("value", [0, -1, -0.5, True, False, "3", None, math.nan, math.inf, -math.inf, [1]])
def test_positive_float_refuses_the_rest_naming_option_and_value(value: Any) -> None:
    with pytest.raises(ConfigError) as info:
        positive_float(value, "NatsSpout('S'): request_timeout_s", expected="a positive number of seconds")
    assert str(info.value) == f"NatsSpout('S'): request_timeout_s must be a positive number of seconds, got {value!r}"


def test_positive_float_allow_zero_and_error_type() -> None:
    assert positive_float(0, "statement_timeout", allow_zero=True) == 0.0
    with pytest.raises(ValueError, match=r"^x must be a number ≥ 0, got -1$"):
        positive_float(-1, "x", allow_zero=True, error=ValueError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fetch_batch": 0}, "NatsSpout('S'): fetch_batch must be a positive int, got 0"),
        ({"read_partitions": True}, "NatsSpout('S'): read_partitions must be a positive int, got True"),
        ({"connect_timeout_s": 0}, "NatsSpout('S'): connect_timeout_s must be a positive number of seconds, got 0"),
        (
            {"request_timeout_s": "5"},
            "NatsSpout('S'): request_timeout_s must be a positive number of seconds, got '5'",
        ),
    ],
)
def test_nats_spout_options(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        NatsSpout("nats://127.0.0.1:1", "S", **kwargs)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"page_size": 0}, "RedisStreamSpout: page_size must be a positive int, got 0"),
        ({"read_partitions": 1.5}, "RedisStreamSpout: read_partitions must be a positive int, got 1.5"),
        (
            {"connect_timeout_s": -1},
            "RedisStreamSpout: connect_timeout_s must be a positive number of seconds, got -1",
        ),
    ],
)
def test_redis_stream_spout_options(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        RedisStreamSpout("redis://127.0.0.1:1/0", "events", **kwargs)
    assert str(info.value) == message


def test_store_timeouts_keep_their_wording() -> None:
    with pytest.raises(ConfigError, match=r"^MemcachedMapState timeout must be a positive number of seconds, got 0.0$"):
        MemcachedMapState.store("memcached://127.0.0.1:1", timeout=0)
    with pytest.raises(ConfigError, match=r"^MemcachedMapState expire must be a non-negative int of seconds, got -1$"):
        MemcachedMapState.store("memcached://127.0.0.1:1", expire=-1)
    with pytest.raises(ConfigError, match=r"^sqlite provider: timeout must be a positive number of seconds, got nan$"):
        check_options("/tmp/x.db", math.nan, "NORMAL", what="sqlite provider")  # noqa: S108 - never opened


def test_no_hand_written_number_check_is_left() -> None:
    """``isinstance(v, bool) or not isinstance(v, int | (int, float)) or v < …`` is what the validators replace."""
    left = []
    for path in SRC.rglob("*.py"):
        if path.name == "_util.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.BoolOp) or not isinstance(node.op, ast.Or) or len(node.values) != 3:
                continue
            first, second, third = node.values
            if (
                isinstance(first, ast.Call)
                and getattr(first.func, "id", None) == "isinstance"
                and isinstance(second, ast.UnaryOp)
                and isinstance(third, ast.Compare)
            ):
                left.append(f"{path.relative_to(SRC).as_posix()}:{node.lineno}")
    assert left == []
