"""The recorded encoding of each stateful component, its check at submit, and ``weir state convert``.

The encodings (:class:`weir.state.evolution.Encoding`) of a topology's components are stored as one
JSON row ``__encoding`` beside the coordinator record (``$checkpointspout-<topology>``); they cover
the component's task namespaces ``<topology>-<component>-<task>``. A submit compares the encoding it
would write with the recorded one (:func:`check_encodings`, before anything is written) and records it
once the coordinator holds its epoch (:func:`record_encodings`).

:func:`convert_values` rewrites every stored value of a component with a user function, as one
fenced, crash-safe step like a bootstrap: the converted rows are staged in
``$convert-<topology>-<component>-<task>`` and checked (each decodes to what the function returned and
conforms to the new value type); then marker ``__convert`` and the new encoding are stored in one
write; the task namespaces are overwritten from the staging ones; the marker is removed. A crash
before the marker leaves the old values (run it again); after it, the next convert or start rolls
forward (:func:`finish_convert`) — the function never runs twice on a value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from weir._faults import crash_point
from weir.checkpoint.coordinator import checkpoint_namespace
from weir.errors import CheckpointError, StateError
from weir.state.backend import Backend
from weir.state.evolution import Encoding, EvolutionError, check_change, conforms
from weir.state.serializers import Serializer
from weir.state.ttl import expiry_of, is_reserved, unwrap, wrap

__all__ = [
    "ENCODING_KEY",
    "check_encodings",
    "convert_values",
    "finish_convert",
    "load_encodings",
    "record_encodings",
]

ENCODING_KEY = b"__encoding"
CONVERT_KEY = b"__convert"
CHUNK_ROWS = 5_000


def load_encodings(backend: Backend, topology: str) -> dict[str, Encoding]:
    """The recorded encoding of each component (empty for a topology that never recorded one)."""
    raw = backend.get(checkpoint_namespace(topology), ENCODING_KEY)
    if raw is None:
        return {}
    try:
        return {str(c): Encoding.from_json(e) for c, e in json.loads(raw).items()}
    except (ValueError, AttributeError, TypeError) as exc:
        msg = f"topology {topology!r}: the recorded encodings ({ENCODING_KEY.decode()!r}) are corrupt ({exc})"
        raise CheckpointError(msg) from exc


def check_encodings(backend: Backend, topology: str, encodings: Mapping[str, Encoding]) -> None:
    """Refuse a change the rules do not allow (:class:`EvolutionError` naming the namespaces and rule)."""
    stored = load_encodings(backend, topology)
    for comp, new in encodings.items():
        old = stored.get(comp)
        if old is not None and comp.startswith("trident:"):
            check_change(old, new, f"topology {topology!r}, Trident map state {comp[len('trident:') :]!r}")
        elif old is not None:
            check_change(old, new, f"topology {topology!r}, component {comp!r} (namespaces {topology}-{comp}-*)")


def record_encodings(backend: Backend, topology: str, encodings: Mapping[str, Encoding], epoch: int | None) -> None:
    """Store the encodings (merged over the recorded ones), fenced by ``epoch``."""
    merged = {c: e.to_json() for c, e in load_encodings(backend, topology).items()}
    merged.update({c: e.to_json() for c, e in encodings.items()})
    data = json.dumps(merged, sort_keys=True).encode()
    if backend.get(checkpoint_namespace(topology), ENCODING_KEY) != data:
        backend.write_direct(checkpoint_namespace(topology), {ENCODING_KEY: data}, epoch)


def _staging(topology: str, component: str, task: int) -> str:
    return f"$convert-{topology}-{component}-{task}"


def _copy_and_drop(backend: Backend, topology: str, component: str, n: int, epoch: int) -> None:
    for t in range(n):
        src, chunk = _staging(topology, component, t), {}
        for k, v in backend.scan(src):
            chunk[bytes(k)] = bytes(v)
            if len(chunk) >= CHUNK_ROWS:
                backend.write_direct(f"{topology}-{component}-{t}", chunk, epoch)
                chunk = {}
        if chunk:
            backend.write_direct(f"{topology}-{component}-{t}", chunk, epoch)
        if t == 0:
            crash_point("convert_between_tasks", 0)
    for t in range(n):
        backend.drop(_staging(topology, component, t))


def finish_convert(backend: Backend, topology: str, epoch: int) -> None:
    """Roll forward a convert a crash interrupted after its marker was stored."""
    ns = checkpoint_namespace(topology)
    raw = backend.get(ns, CONVERT_KEY)
    if raw is None:
        return
    marker = json.loads(raw)
    _copy_and_drop(backend, topology, str(marker["component"]), int(marker["tasks"]), epoch)
    backend.write_direct(ns, {CONVERT_KEY: None}, epoch)


def convert_values(
    backend: Backend,
    topology: str,
    component: str,
    tasks: int,
    fn: Callable[[Any], Any],
    value_serializer: Serializer,
    new_encoding: Encoding,
    epoch: int,
) -> int:
    """Rewrite every stored value of ``component`` with ``fn`` (module doc); the number of values rewritten."""
    finish_convert(backend, topology, epoch)
    where = f"topology {topology!r}, component {component!r}"
    for t in range(tasks):
        backend.drop(_staging(topology, component, t))
    n = 0
    for t in range(tasks):
        ns = f"{topology}-{component}-{t}"
        if backend.txids(ns).prepared is not None:
            msg = f"{where}: namespace {ns!r} has a prepared transaction; start and stop the topology (recovery) first"
            raise StateError(msg)
        chunk: dict[bytes, bytes | None] = {}
        for skey, stored in backend.scan(ns):
            skey, stored = bytes(skey), bytes(stored)
            if is_reserved(skey):
                continue
            exp = expiry_of(stored)
            inner = unwrap(stored, None) if exp is not None else stored
            assert inner is not None
            try:
                new = fn(value_serializer.deserialize(inner))
                data = value_serializer.serialize(new)
                ok = value_serializer.deserialize(data) == new and conforms(new, new_encoding.value_type)
            except Exception as exc:  # the user's function: name the key and keep the cause
                msg = (
                    f"{where}, namespace {ns!r}, key {skey[:60]!r}: the conversion failed: {exc!r}; nothing was changed"
                )
                raise EvolutionError(msg) from exc
            if not ok:
                msg = (
                    f"{where}, namespace {ns!r}, key {skey[:60]!r}: the converted value {new!r:.80} does not conform "
                    f"to the new value type {json.dumps(new_encoding.value_type)} or does not round-trip; nothing was "
                    "changed"
                )
                raise EvolutionError(msg)
            chunk[skey] = wrap(data, exp) if exp is not None else data  # a TTL is kept
            n += 1
            if len(chunk) >= CHUNK_ROWS:
                backend.write_direct(_staging(topology, component, t), chunk, epoch)
                chunk = {}
        if chunk:
            backend.write_direct(_staging(topology, component, t), chunk, epoch)
    crash_point("convert_staged", 0)
    merged = {c: e.to_json() for c, e in load_encodings(backend, topology).items()}
    merged[component] = new_encoding.to_json()
    marker = json.dumps({"component": component, "tasks": tasks}).encode()
    backend.write_direct(
        checkpoint_namespace(topology),
        {CONVERT_KEY: marker, ENCODING_KEY: json.dumps(merged, sort_keys=True).encode()},
        epoch,
    )
    _copy_and_drop(backend, topology, component, tasks, epoch)
    backend.write_direct(checkpoint_namespace(topology), {CONVERT_KEY: None}, epoch)
    return n
