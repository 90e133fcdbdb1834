"""The recorded encoding of each Trident map state, and its check at submit (schema evolution).

Each of weir's map states (a :class:`~weir.trident.backing.MapStateFactory`: SQLite, Redis,
PostgreSQL, HBase, memcached) records its encoding as ``trident:<name>`` (its table or key prefix,
the name ``weir state ls`` lists it by) in the row
``__encoding`` beside the coordinator record, the row Storm bolts record theirs in
(:mod:`weir.checkpoint.encoding`), and the same written rules (:func:`weir.state.evolution.check_change`)
decide a change at the next submit, before anything is written:

* ``key_serializer`` ``json`` and ``key_type`` ``any`` — a key is the JSON list of its grouping values;
* ``value_serializer`` ``trident-<state type>`` — an opaque cell ``[txid, curr, prev]``, a
  transactional one ``[txid, val]``, or a plain value: a changed state type is a changed cell format,
  refused by rule S1 (stored cells would not decode);
* ``value_type`` — what the state declares with ``weir.state.value.type`` (default ``any``): one type
  for every map state of the topology, or a dict ``{state name: type}`` (a dict whose only key is
  ``record`` is one record type). Rules V1/V2/R1-R3 apply; ``weir state convert --component
  trident:<name>`` rewrites the stored values (``curr`` and ``prev`` of an opaque cell alike).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from weir.checkpoint.encoding import load_encodings
from weir.errors import ConfigError
from weir.state.backend import Backend
from weir.state.evolution import VALUE_TYPE_KEY, Encoding, check_change, parse_type
from weir.trident.backing.factory import MapStateFactory
from weir.trident.state import StateType

__all__ = ["PREFIX", "check_map_encodings", "map_state_encoding", "per_state", "trident_encodings"]

#: the name a map state's encoding is recorded under: ``trident:<state name>``
PREFIX = "trident:"


def map_state_encoding(state_type: StateType, value_type: Any = "any") -> Encoding:
    """The encoding of a map state of ``state_type`` whose values are of ``value_type``."""
    return Encoding("json", f"trident-{state_type.value}", "any", value_type)


def per_state(name: str, conf: Mapping[str, Any], key: str, states: list[str]) -> dict[str, Any]:
    """``conf[key]`` per state name: one setting for every state, or a dict ``{state name: setting}``.

    Raises
    ------
    ConfigError
        A dict naming a state the topology does not have (the message lists them).
    """
    spec = conf.get(key)
    if spec is None:
        return {}
    if isinstance(spec, Mapping) and set(spec) != {"record"}:
        out: dict[str, Any] = {}
        for given, value in spec.items():
            sid = given[len(PREFIX) :] if isinstance(given, str) and given.startswith(PREFIX) else given
            if sid not in states:
                msg = (
                    f"topology {name!r}: {key} names state {given!r}, which is no map state of this Trident "
                    f"topology (its states: {sorted(states)}; name one with TridentState.name(...))"
                )
                raise ConfigError(msg)
            out[sid] = value
        return out
    return dict.fromkeys(states, spec)


def trident_encodings(name: str, conf: Mapping[str, Any], topology: Any) -> dict[str, Encoding]:
    """``trident:<table or key prefix>`` → the encoding of each of weir's map states of ``topology``."""
    states = {s.state_id: s.factory for s in topology.states if isinstance(s.factory, MapStateFactory)}
    types = per_state(name, conf, VALUE_TYPE_KEY, sorted(states))
    out = {}
    for sid, factory in states.items():
        vtype = parse_type(types.get(sid, "any"), f"topology {name!r}, state {sid!r}: {VALUE_TYPE_KEY}")
        out[PREFIX + (factory.store.catalog_name() or sid)] = map_state_encoding(factory.state_type, vtype)
    return out


def check_map_encodings(backend: Backend, name: str, topology: Any, encodings: Mapping[str, Encoding]) -> None:
    """Refuse a change the rules do not allow; the error names the topology, the state and its map state.

    Raises
    ------
    EvolutionError
        Naming ``topology``, the state (``name()``), the map state (``trident:<table or prefix>``), both
        encodings and the rule.
    """
    stored = load_encodings(backend, name)
    states = {
        PREFIX + (s.factory.store.catalog_name() or s.state_id): s.state_id
        for s in topology.states
        if isinstance(s.factory, MapStateFactory)
    }
    for key, new in encodings.items():
        old = stored.get(key)
        if old is not None:
            check_change(old, new, f"topology {name!r}, state {states.get(key, key)!r} (Trident map state {key})")
