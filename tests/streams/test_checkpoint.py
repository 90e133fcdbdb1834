"""The Checkpoint object: byte stream, objects, key-value map, stored format and its damage."""

from __future__ import annotations

import pickle
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weir.errors import CheckpointError
from weir.streams import Checkpoint
from weir.streams.checkpoint import MAGIC, iter_chunks


def test_stream_objects_and_map_round_trip() -> None:
    ck = Checkpoint(7, 1234.5, where="operator 'w' task 1")
    assert ck.sequence_id == 7 and ck.timestamp == 1234.5 and ck.writing
    ck.output_stream.write(b"raw:")
    ck.write_object({"n": 1})
    ck.write_object([1, 2, 3])
    ck.put("window", 4)
    ck.put("blob", b"\x00\x01")
    back = Checkpoint.from_bytes(ck.to_bytes(), 7, 1234.5)
    assert not back.writing and back.sequence_id == 7
    assert back.input_stream.read(4) == b"raw:"
    assert back.read_object() == {"n": 1} and back.read_object() == [1, 2, 3]
    assert back.get("window") == 4 and back.get("blob") == b"\x00\x01" and back.get("none", "d") == "d"
    assert sorted(back.keys()) == ["blob", "window"] and "window" in back


def test_reading_past_what_was_written_is_a_clear_error() -> None:
    ck = Checkpoint(1, where="operator 'w' task 0")
    ck.write_object(1)
    back = Checkpoint.from_bytes(ck.to_bytes(), 1, where="operator 'w' task 0")
    back.read_object()
    with pytest.raises(CheckpointError, match="checkpoint 1 of operator 'w' task 0 has no more objects"):
        back.read_object()


def test_modes_are_enforced() -> None:
    ck = Checkpoint(1)
    with pytest.raises(CheckpointError, match="is being written: read it only inside reset"):
        ck.input_stream  # noqa: B018
    with pytest.raises(CheckpointError, match="keys are strings"):
        ck.put(3, "x")  # type: ignore[arg-type]
    back = Checkpoint.from_bytes(ck.to_bytes(), 1)
    with pytest.raises(CheckpointError, match="was read back"):
        back.output_stream  # noqa: B018
    with pytest.raises(CheckpointError, match="put\\(\\) only inside checkpoint"):
        back.put("k", 1)
    with pytest.raises(CheckpointError, match="cannot be stored again"):
        back.to_parts()


def test_objects_that_are_not_plain_data_are_refused_with_the_type() -> None:
    ck = Checkpoint(2, where="operator 'w' task 0")
    with pytest.raises(CheckpointError, match="of operator 'w' task 0: write_object: a value of type lock"):
        ck.write_object(threading.Lock())
    ck.put("lock", threading.Lock())
    with pytest.raises(CheckpointError, match="the key-value map: a value of type lock is not plain data"):
        ck.to_parts()


def test_the_pickle_serializer_is_opt_in_and_read_only_when_trusted() -> None:
    ck = Checkpoint(4, where="operator 'w' task 0", serializer="pickle")
    ck.write_object(complex(1, 2))
    ck.put("c", complex(3, 4))
    data = ck.to_bytes()
    back = Checkpoint.from_bytes(data, 4, serializer="pickle")
    assert back.read_object() == complex(1, 2) and back.get("c") == complex(3, 4)
    with pytest.raises(CheckpointError, match="checkpoint 4 of w is stored pickled .codec p.; weir never unpickles"):
        Checkpoint.from_bytes(data, 4, where="w")
    old = b"WEIRCKP1" + data[len(MAGIC) + 1 :]  # weir's version-1 format: always pickled
    with pytest.raises(CheckpointError, match="stored pickled .an older weir format."):
        Checkpoint.from_bytes(old, 4, where="w")
    assert Checkpoint.from_bytes(old, 4, serializer="pickle").get("c") == complex(3, 4)


def test_plain_data_types_round_trip() -> None:
    import datetime as dt
    from decimal import Decimal

    value = {
        "t": (1, 2.5, None, True),
        "s": {1, 2},
        "f": frozenset({"a"}),
        "b": b"\x00",
        "when": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
        "day": dt.date(2026, 1, 2),
        "d": Decimal("1.10"),
        (1, "k"): [[], {}],
    }
    ck = Checkpoint(5)
    ck.write_object(value)
    ck.put("v", value)
    back = Checkpoint.from_bytes(ck.to_bytes(), 5)
    assert back.read_object() == value and back.get("v") == value


def test_unpicklable_objects_are_refused_with_the_type_in_pickle_mode() -> None:
    ck = Checkpoint(2, where="operator 'w' task 0", serializer="pickle")
    with pytest.raises(CheckpointError, match="checkpoint 2 of operator 'w' task 0: cannot write an object of type"):
        ck.write_object(threading.Lock())
    ck.put("lock", threading.Lock())
    with pytest.raises(CheckpointError, match="the key-value map cannot be pickled"):
        ck.to_parts()


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "does not start with the checkpoint header"),
        (b"NOTACKPT" + b"\x00" * 20, "does not start with the checkpoint header"),
        (MAGIC + b"d" + (100).to_bytes(8, "big") + b"short", "truncated"),
        (MAGIC + b"d" + (0).to_bytes(8, "big") + (3).to_bytes(8, "big") + b"abcd", "does not match its header"),
        (MAGIC + b"d" + (0).to_bytes(8, "big") + (3).to_bytes(8, "big") + b"abc", "not weir's data encoding"),
        (MAGIC + b"x", "unknown codec"),
    ],
)
def test_damaged_stored_data_raises_checkpoint_error(data: bytes, match: str) -> None:
    with pytest.raises(CheckpointError, match=match) as info:
        Checkpoint.from_bytes(data, 9, where="operator 'w' task 0")
    assert "checkpoint 9 of operator 'w' task 0 is corrupt" in str(info.value)


def test_garbage_in_the_stream_is_a_checkpoint_error_not_an_unpickling_error() -> None:
    ck = Checkpoint(3, serializer="pickle")
    ck.output_stream.write(pickle.dumps([1, 2])[:-4])  # a cut-off pickle
    back = Checkpoint.from_bytes(ck.to_bytes(), 3, serializer="pickle")
    with pytest.raises(CheckpointError, match="checkpoint 3 cannot be read at byte 0"):
        back.read_object()


def test_a_pickle_in_the_stream_is_not_read_as_an_object() -> None:
    ck = Checkpoint(3)
    ck.output_stream.write(pickle.dumps([1, 2]))
    back = Checkpoint.from_bytes(ck.to_bytes(), 3)
    with pytest.raises(CheckpointError, match="checkpoint 3 cannot be read at byte 0: .*no object written"):
        back.read_object()


@given(st.lists(st.binary(max_size=50), max_size=6), st.integers(min_value=1, max_value=17))
def test_chunks_concatenate_to_the_parts(parts: list[bytes], size: int) -> None:
    chunks = list(iter_chunks(list(parts), size))
    assert b"".join(chunks) == b"".join(parts)
    assert all(len(c) == size for c in chunks[:-1])
    assert all(0 < len(c) <= size for c in chunks)
