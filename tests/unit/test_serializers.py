"""Serializers: round trips, the cross-language JSON form, and the errors for what they refuse."""

from __future__ import annotations

import json
import math
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weir.errors import ConfigError, SerializationError, StateError
from weir.state.serializers import (
    BytesSerializer,
    FloatSerializer,
    IntSerializer,
    JsonSerializer,
    PickleSerializer,
    Serializer,
    StrSerializer,
    serializer_for,
)

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


# ---- json (the default) ----------------------------------------------------------------------
@given(JSON_VALUES)
def test_json_round_trips(value: object) -> None:
    ser = JsonSerializer()
    data = ser.serialize(value)
    assert isinstance(data, bytes)
    assert ser.deserialize(data) == value


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (42, b"42"),
        (-7, b"-7"),
        (2**70, str(2**70).encode()),
        ("word", b'"word"'),
        ("", b'""'),
        ("ключ", '"ключ"'.encode()),
        ('say "hi"\\', b'"say \\"hi\\"\\\\"'),
        (True, b"true"),
        (None, b"null"),
        (1.5, b"1.5"),
        ([1, "a", None], b'[1,"a",null]'),
        ({"a": 1, "b": [True]}, b'{"a":1,"b":[true]}'),
        ((1, 2), b"[1,2]"),
        (b"\x00\xff", b'{"$bytes":"AP8="}'),
    ],
)
def test_json_wire_form_is_compact_and_readable_elsewhere(value: object, wire: bytes) -> None:
    ser = JsonSerializer()
    assert ser.serialize(value) == wire
    json.loads(wire.decode("utf-8"))  # any JSON reader (a dashboard in another language) reads it


def test_json_int_and_str_keys_stay_distinct() -> None:
    ser = JsonSerializer()
    assert ser.serialize(1) != ser.serialize("1")
    assert ser.deserialize(ser.serialize("1")) == "1"
    assert ser.deserialize(ser.serialize(1)) == 1


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\x00", "line\nbreak\u2028", "\x7f", "🔑"])
def test_json_odd_strings_round_trip(text: str) -> None:
    ser = JsonSerializer()
    assert ser.deserialize(ser.serialize(text)) == text


def test_json_tuples_come_back_as_lists() -> None:
    ser = JsonSerializer()
    assert ser.deserialize(ser.serialize(("a", 1))) == ["a", 1]


@pytest.mark.parametrize(
    ("value", "names"),
    [
        (object(), ["builtins.object"]),
        ({1, 2}, ["set"]),
        ({"a": [1, {2}]}, ["value.a[1]", "set"]),
        ({1: "x"}, ["dict key 1", "str keys"]),
        (float("nan"), ["nan"]),
        (float("inf"), ["inf"]),
        ([math.inf], ["value[0]"]),
        (complex(1, 2), ["complex"]),
    ],
)
def test_json_refuses_what_does_not_round_trip(value: object, names: list[str]) -> None:
    with pytest.raises(SerializationError) as info:
        JsonSerializer().serialize(value)
    for name in names:
        assert name in str(info.value)
    assert isinstance(info.value, TypeError) and isinstance(info.value, StateError)


@pytest.mark.parametrize("data", [b"{not json", b"\xff\xfe", b"", b"[1,"])
def test_json_rejects_foreign_bytes(data: bytes) -> None:
    with pytest.raises(SerializationError, match="another serializer"):
        JsonSerializer().deserialize(data)


# ---- pickle (opt-in) -------------------------------------------------------------------------
def test_pickle_round_trips_python_objects() -> None:
    ser = PickleSerializer()
    value = {"set": {1, 2}, "complex": complex(1, 2), "tuple": (1, "a"), "bytes": b"\x00"}
    assert ser.deserialize(ser.serialize(value)) == value


def test_pickle_errors() -> None:
    ser = PickleSerializer()
    with pytest.raises(SerializationError, match="function"):
        ser.serialize(lambda: None)
    with pytest.raises(SerializationError, match="unpickled"):
        ser.deserialize(b"not a pickle")
    truncated = pickle.dumps({"a": 1})[:-3]
    with pytest.raises(SerializationError):
        ser.deserialize(truncated)


# ---- typed serializers (Storm's keyClass / valueClass) ---------------------------------------
@pytest.mark.parametrize(
    ("ser", "value", "wire"),
    [
        (StrSerializer(), "héllo", "héllo".encode()),
        (StrSerializer(), "", b""),
        (IntSerializer(), 12345, b"12345"),
        (IntSerializer(), -3, b"-3"),
        (IntSerializer(), 2**80, str(2**80).encode()),
        (FloatSerializer(), 1.25, b"1.25"),
        (FloatSerializer(), 3, b"3.0"),
        (BytesSerializer(), b"\x00\x01", b"\x00\x01"),
        (BytesSerializer(), bytearray(b"ab"), b"ab"),
    ],
)
def test_typed_serializers_write_the_plain_value(ser: Serializer, value: object, wire: bytes) -> None:
    assert ser.serialize(value) == wire
    back = ser.deserialize(wire)
    assert back == value
    assert isinstance(ser, Serializer)


def test_float_serializer_keeps_special_values() -> None:
    ser = FloatSerializer()
    assert ser.deserialize(ser.serialize(float("inf"))) == math.inf
    assert math.isnan(ser.deserialize(ser.serialize(float("nan"))))
    assert ser.deserialize(ser.serialize(0.1)) == 0.1


@pytest.mark.parametrize(
    ("ser", "value", "expected"),
    [
        (StrSerializer(), b"bytes", "expected str, got bytes"),
        (StrSerializer(), 1, "expected str, got int"),
        (IntSerializer(), "1", "expected int, got str"),
        (IntSerializer(), True, "expected int, got bool"),
        (IntSerializer(), 1.0, "expected int, got float"),
        (FloatSerializer(), "1.0", "expected float, got str"),
        (FloatSerializer(), False, "expected float, got bool"),
        (BytesSerializer(), "text", "expected bytes, got str"),
    ],
)
def test_typed_serializers_refuse_other_types(ser: Serializer, value: object, expected: str) -> None:
    with pytest.raises(SerializationError, match=expected):
        ser.serialize(value)


def test_typed_deserialize_errors() -> None:
    with pytest.raises(SerializationError, match="not a decimal integer"):
        IntSerializer().deserialize(b"12a")
    with pytest.raises(SerializationError, match="not a float"):
        FloatSerializer().deserialize(b"one")


# ---- resolution by name ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "cls"),
    [
        (None, JsonSerializer),
        ("", JsonSerializer),
        ("json", JsonSerializer),
        ("pickle", PickleSerializer),
        ("str", StrSerializer),
        ("java.lang.String", StrSerializer),
        ("int", IntSerializer),
        ("java.lang.Long", IntSerializer),
        ("java.lang.Integer", IntSerializer),
        ("float", FloatSerializer),
        ("java.lang.Double", FloatSerializer),
        ("bytes", BytesSerializer),
        ("weir.state.serializers.StrSerializer", StrSerializer),
        ("weir.state.serializers:IntSerializer", IntSerializer),
    ],
)
def test_serializer_for_names(spec: str | None, cls: type) -> None:
    assert isinstance(serializer_for(spec, what="valueSerializerClass"), cls)


class _NotASerializer:
    pass


class _DuckSerializer:
    """Has the methods but does not subclass the SPI: refused, and never instantiated."""

    created = False

    def __init__(self) -> None:
        type(self).created = True

    def serialize(self, obj: object) -> bytes:
        return b""

    def deserialize(self, data: bytes) -> object:
        return None


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("nosuch", "valueSerializerClass"),
        ("no.such.module.Ser", "cannot import module"),
        ("weir.state.serializers.NoSuch", "has no attribute"),
        (f"{__name__}._NotASerializer", "is not a subclass of weir.state.Serializer (it has no serialize"),
        (f"{__name__}._DuckSerializer", "is not a subclass of weir.state.Serializer; "),
        ("os.system", "is not a subclass of weir.state.Serializer"),
    ],
)
def test_serializer_for_errors_name_the_key(spec: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        serializer_for(spec, what="valueSerializerClass")
    assert expected in str(info.value)
    assert "valueSerializerClass" in str(info.value)
    assert not _DuckSerializer.created
