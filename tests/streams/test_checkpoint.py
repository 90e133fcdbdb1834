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


def test_unpicklable_objects_are_refused_with_the_type() -> None:
    ck = Checkpoint(2, where="operator 'w' task 0")
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
        (MAGIC + (100).to_bytes(8, "big") + b"short", "truncated"),
        (MAGIC + (0).to_bytes(8, "big") + (3).to_bytes(8, "big") + b"abcd", "does not match its header"),
        (MAGIC + (0).to_bytes(8, "big") + (3).to_bytes(8, "big") + b"abc", "key-value map cannot be read"),
    ],
)
def test_damaged_stored_data_raises_checkpoint_error(data: bytes, match: str) -> None:
    with pytest.raises(CheckpointError, match=match) as info:
        Checkpoint.from_bytes(data, 9, where="operator 'w' task 0")
    assert "checkpoint 9 of operator 'w' task 0 is corrupt" in str(info.value)


def test_garbage_in_the_stream_is_a_checkpoint_error_not_an_unpickling_error() -> None:
    ck = Checkpoint(3)
    ck.output_stream.write(pickle.dumps([1, 2])[:-4])  # a cut-off pickle
    back = Checkpoint.from_bytes(ck.to_bytes(), 3)
    with pytest.raises(CheckpointError, match="checkpoint 3 cannot be read at byte 0"):
        back.read_object()


@given(st.lists(st.binary(max_size=50), max_size=6), st.integers(min_value=1, max_value=17))
def test_chunks_concatenate_to_the_parts(parts: list[bytes], size: int) -> None:
    chunks = list(iter_chunks(list(parts), size))
    assert b"".join(chunks) == b"".join(parts)
    assert all(len(c) == size for c in chunks[:-1])
    assert all(0 < len(c) <= size for c in chunks)
