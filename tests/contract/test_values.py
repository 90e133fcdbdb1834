"""The provider contract: unicode, binary and large keys and values; serialization errors."""

from __future__ import annotations

import os
import random
import string

import pytest

from tests.contract._support import ALL_LAYOUTS, committed, independent_reader, new_ns, provider_of, view
from weir.errors import SerializationError, StateError

UNICODE_ITEMS = {
    "ключ": "значение",
    "日本語のキー": "値 ✓",
    "emoji 🔑": "🚀" * 100,
    "nul\x00inside": "tab\tand\nnewline",
    "": "empty key",
    " ": "",
    "quote\"'\\": "back\\slash",
    "surrogate-free 𝄞": "𝄞",
    "1": "the string one",
    1: "the int one",
    -5: 2**70,
    "nested": {"list": [1, 2.5, None, True, "x"], "dict": {"ä": []}},
    "float": 0.1,
    "false": False,
}

BINARY_ITEMS = {
    b"": b"",
    b"\x00": b"\x00\x00",
    b"\xff\xfe": bytes(range(256)),
    bytes(range(256)): b"\x00\xff" * 50,
    "bytes value": b"\x80not utf8\xc3",
}


@ALL_LAYOUTS
def test_unicode_keys_and_values(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    for k, v in UNICODE_ITEMS.items():
        state.put(k, v)
    assert view(state) == UNICODE_ITEMS
    state.prepare_commit(1)
    state.commit(1)
    assert committed(provider, ns) == UNICODE_ITEMS
    with independent_reader(provider, ns) as reader:
        for k, v in UNICODE_ITEMS.items():
            assert reader.get(k) == v
        assert reader.get_many(list(UNICODE_ITEMS)) == list(UNICODE_ITEMS.values())
    assert provider.backend.count(ns) == len(UNICODE_ITEMS)


@ALL_LAYOUTS
def test_binary_keys_and_values_with_the_default_serializer(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    for k, v in BINARY_ITEMS.items():
        state.put(k, v)
    state.prepare_commit(1)
    state.commit(1)
    assert committed(provider, ns) == BINARY_ITEMS
    state.delete(b"\x00")
    state.prepare_commit(2)
    state.commit(2)
    expected = {k: v for k, v in BINARY_ITEMS.items() if k != b"\x00"}
    assert committed(provider, ns) == expected


@ALL_LAYOUTS
def test_raw_bytes_serializers(provider_url: str) -> None:
    provider = provider_of(provider_url, keySerializerClass="bytes", valueSerializerClass="bytes")
    ns = new_ns()
    state = provider.new_state(ns)
    items = {bytes([i]): bytes([255 - i]) * (i + 1) for i in range(256)}
    items[b"\x00" * 10] = b""
    for k, v in items.items():
        state.put(k, v)
    state.prepare_commit(1)
    state.commit(1)
    got = committed(provider, ns)
    assert got == items
    assert all(isinstance(k, bytes) and isinstance(v, bytes) for k, v in got.items())


@ALL_LAYOUTS
def test_large_values(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    rnd = random.Random(7)
    blob = rnd.randbytes(1_500_000)
    text = "".join(rnd.choice(string.ascii_letters + "äöü€𝄞") for _ in range(1_100_000))
    listing = list(range(100_000))
    state.put("blob", blob)
    state.put("text", text)
    state.put("list", listing)
    state.prepare_commit(1)
    assert state.get("blob") == blob
    state.commit(1)
    with independent_reader(provider, ns) as reader:
        assert reader.get("blob") == blob
        assert reader.get("text") == text
        assert reader.get("list") == listing
        assert view(reader) == {"blob": blob, "text": text, "list": listing}
    # overwrite a large value with a small one and back
    state.put("blob", b"small")
    state.prepare_commit(2)
    state.commit(2)
    assert committed(provider, ns)["blob"] == b"small"


@ALL_LAYOUTS
def test_large_keys(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    rnd = random.Random(11)
    # incompressible keys of 8 KiB and 64 KiB (e.g. a long URL or a document used as a key)
    keys = ["".join(rnd.choice(string.ascii_letters + string.digits) for _ in range(n)) for n in (8192, 65536)]
    keys.append(os.urandom(8192))
    for i, k in enumerate(keys):
        state.put(k, i)
    state.prepare_commit(1)
    state.commit(1)
    assert committed(provider, ns) == {k: i for i, k in enumerate(keys)}
    state.delete(keys[0])
    state.prepare_commit(2)
    state.commit(2)
    assert committed(provider, ns) == {k: i for i, k in enumerate(keys) if i}


# ---- serialization errors --------------------------------------------------------------------
class Opaque:
    """Not JSON-serializable."""


@ALL_LAYOUTS
def test_unserializable_value_names_namespace_key_and_type(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    state.put("k", "v1")
    state.prepare_commit(1)
    state.commit(1)
    state.put("other", 1)

    with pytest.raises(SerializationError) as info:
        state.put("k", Opaque())
    msg = str(info.value)
    assert ns in msg and "'k'" in msg and "Opaque" in msg
    assert isinstance(info.value, StateError) and isinstance(info.value, TypeError)

    with pytest.raises(SerializationError) as info:
        state.put("k2", {"a": [1, {1, 2}]})
    msg = str(info.value)
    assert ns in msg and "'k2'" in msg and "set" in msg

    with pytest.raises(SerializationError) as info:
        state.put("nan", float("nan"))
    assert ns in str(info.value) and "'nan'" in str(info.value)

    # the failed puts left no trace: own view, prepared set and committed rows
    assert view(state) == {"k": "v1", "other": 1}
    assert committed(provider, ns) == {"k": "v1"}
    state.prepare_commit(2)
    state.commit(2)
    assert committed(provider, ns) == {"k": "v1", "other": 1}


@ALL_LAYOUTS
def test_unserializable_key_names_namespace(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    with pytest.raises(SerializationError) as info:
        state.put(Opaque(), 1)
    assert ns in str(info.value)
    with pytest.raises(SerializationError):
        state.get(Opaque())
    assert view(state) == {}


@ALL_LAYOUTS
def test_unpicklable_value_with_the_pickle_serializer(provider_url: str) -> None:
    provider = provider_of(provider_url, valueSerializerClass="pickle")
    ns = new_ns()
    state = provider.new_state(ns)
    state.put("set", {1, 2, 3})
    state.put("obj", complex(1, 2))
    with pytest.raises(SerializationError) as info:
        state.put("fn", lambda: None)
    msg = str(info.value)
    assert ns in msg and "'fn'" in msg and "function" in msg
    state.prepare_commit(1)
    state.commit(1)
    assert committed(provider, ns) == {"set": {1, 2, 3}, "obj": complex(1, 2)}
