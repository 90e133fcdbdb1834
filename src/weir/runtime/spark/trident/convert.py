"""``weir state convert --component trident:<name>``: rewrite a Trident map state's values with a function.

The step of :func:`weir.checkpoint.encoding.convert_values` for a map state. Every cell is read,
and the user's function (value → new value) is applied to each value it holds — an opaque cell's
``curr`` **and** ``prev`` (so a replay of the cell's last batch builds on a converted value too), a
transactional cell's ``val``, a plain value — keeping the cell's txid. Each result must round-trip
through JSON and conform to the new value type. Then, like a bootstrap:

1. the converted cells are staged in ``$convert-<topology>-trident-<name>`` beside the coordinator
   record (a crash here leaves the map state as it was; run the convert again);
2. marker ``__convert_trident`` and the new encoding (``trident:<name>`` in ``__encoding``) are
   stored in one write with the coordinator's epoch;
3. the staged cells are written over the map state's, chunk by chunk;
4. the staging namespace is dropped and the marker removed.

A crash after step 2 is rolled forward by the next convert or the next start of the topology
(:func:`finish_trident_convert`), from the staged cells — the function never runs twice on a value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from weir._faults import crash_point
from weir.checkpoint.coordinator import checkpoint_namespace
from weir.checkpoint.encoding import ENCODING_KEY, load_encodings
from weir.errors import CheckpointError, StateError
from weir.runtime.spark.trident.bootstrap import write_staged
from weir.state.backend import Backend
from weir.state.evolution import Encoding, EvolutionError, conforms
from weir.trident.backing.codec import decode_json, encode_json, encode_key
from weir.trident.backing.factory import MapStateFactory
from weir.trident.state import Key, OpaqueValue, StateType, TransactionalValue

__all__ = ["CONVERT_KEY", "convert_map_values", "finish_trident_convert", "staging_namespace"]

CONVERT_KEY = b"__convert_trident"
PREFIX = "trident:"
CHUNK_ROWS = 1_000


def staging_namespace(topology: str, name: str) -> str:
    """Where a convert stages a map state's cells: ``$convert-<topology>-trident-<name>``."""
    return f"$convert-{topology}-trident-{name}"


def _stored(cell: Any, state_type: StateType) -> Any:
    if state_type is StateType.OPAQUE:
        return [cell.curr_txid, cell.curr, cell.prev]
    if state_type is StateType.TRANSACTIONAL:
        return [cell.txid, cell.val]
    return cell


def _cell(stored: Any, state_type: StateType) -> Any:
    if state_type is StateType.OPAQUE:
        return OpaqueValue(stored[0], stored[1], stored[2])
    if state_type is StateType.TRANSACTIONAL:
        return TransactionalValue(stored[0], stored[1])
    return stored


def _write(backend: Backend, staging: str, factory: MapStateFactory, where: str) -> None:
    def refused(exc: Exception) -> Exception:
        msg = (
            f"{where}: the converted cells cannot be written to the {factory.describe()} ({exc}); the convert "
            "is recorded and is finished by the next convert or start — make the store accept the new values "
            "(e.g. the PostgreSQL value column's type) and start again"
        )
        return StateError(msg)

    write_staged(
        backend,
        staging,
        factory,
        where,
        lambda stored: _cell(stored, factory.state_type),
        "trident_convert_between_chunks",
        refused,
    )


def finish_trident_convert(backend: Backend, topology: str, epoch: int, factories: Mapping[str, Any]) -> None:
    """Roll forward a convert a crash interrupted after its marker (``factories``: map name → factory)."""
    ns = checkpoint_namespace(topology)
    raw = backend.get(ns, CONVERT_KEY)
    if raw is None:
        return
    try:
        name = str(json.loads(raw)["map"])
    except (ValueError, KeyError, TypeError) as exc:
        msg = f"namespace {ns!r}: the Trident convert marker is corrupt ({exc}); inspect it with `weir state inspect`"
        raise CheckpointError(msg) from exc
    factory = factories.get(name)
    if not isinstance(factory, MapStateFactory):
        msg = (
            f"topology {topology!r}: the convert of Trident map state {PREFIX}{name} was interrupted and is not "
            f"among the map states given here ({sorted(factories)}); finish it first: run the same "
            f"`weir state convert --component {PREFIX}{name}` again, or start the topology that has it"
        )
        raise CheckpointError(msg)
    where = f"topology {topology!r}, Trident map state {name!r}: convert"
    _write(backend, staging_namespace(topology, name), factory, where)
    backend.drop(staging_namespace(topology, name))
    backend.write_direct(ns, {CONVERT_KEY: None}, epoch)


def convert_map_values(
    backend: Backend,
    topology: str,
    name: str,
    factory: MapStateFactory,
    cells: Iterable[tuple[Key, Any]],
    fn: Callable[[Any], Any],
    new_encoding: Encoding,
    epoch: int,
) -> int:
    """Rewrite every value of map state ``name`` (its decoded ``cells``) with ``fn``; the number of cells."""
    finish_trident_convert(backend, topology, epoch, {name: factory})
    where = f"topology {topology!r}, Trident map state {name!r}"
    staging = staging_namespace(topology, name)
    backend.drop(staging)
    st = factory.state_type
    vtype = new_encoding.value_type

    def convert(key: Key, value: Any) -> Any:
        if value is None:
            return None
        try:
            new = fn(value)
            ok = decode_json(encode_json(new, what="the converted value"), what="it") == new and conforms(new, vtype)
        except Exception as exc:  # the user's function: name the key and keep the cause
            backend.drop(staging)
            msg = f"{where}, key {list(key)!r:.80}: the conversion failed: {exc!r}; nothing was changed"
            raise EvolutionError(msg) from exc
        if not ok:
            backend.drop(staging)
            msg = (
                f"{where}, key {list(key)!r:.80}: the converted value {new!r:.80} does not conform to the new value "
                f"type {json.dumps(vtype)} or does not round-trip through JSON; nothing was changed"
            )
            raise EvolutionError(msg)
        return new

    n = 0
    chunk: dict[bytes, bytes | None] = {}
    for key, cell in cells:
        if isinstance(cell, OpaqueValue):
            new_cell: Any = OpaqueValue(cell.curr_txid, convert(key, cell.curr), convert(key, cell.prev))
        elif isinstance(cell, TransactionalValue):
            new_cell = TransactionalValue(cell.txid, convert(key, cell.val))
        else:
            new_cell = convert(key, cell)
        chunk[encode_key(key, where=where).encode()] = encode_json(_stored(new_cell, st), what=f"{where}: cell")
        n += 1
        if len(chunk) >= CHUNK_ROWS:
            backend.write_direct(staging, chunk, epoch)
            chunk = {}
    if chunk:
        backend.write_direct(staging, chunk, epoch)
    crash_point("trident_convert_staged", 0)
    merged = {c: e.to_json() for c, e in load_encodings(backend, topology).items()}
    merged[PREFIX + name] = new_encoding.to_json()
    marker = json.dumps({"map": name}).encode()
    backend.write_direct(
        checkpoint_namespace(topology),
        {CONVERT_KEY: marker, ENCODING_KEY: json.dumps(merged, sort_keys=True).encode()},
        epoch,
    )
    crash_point("trident_convert_switching", 0)
    _write(backend, staging, factory, where)
    backend.drop(staging)
    backend.write_direct(checkpoint_namespace(topology), {CONVERT_KEY: None}, epoch)
    return n
