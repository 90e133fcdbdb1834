"""Trident map-state cells as ``weir state dump`` shows them, and the values ``weir state load`` takes.

``weir state dump`` prints a Trident cell decoded (opaque ``{"txid", "curr", "prev"}``, transactional
``{"txid", "val"}``, a non-transactional value as itself); ``weir state load --component trident:<name>``
takes values and writes them as committed cells. The round trip is ``dump --values | load`` (the dump
prints each cell's current value) or ``dump | load --cells`` (the load takes each dumped cell's
current value); this module holds both conversions, and recognises a dumped cell given where a value
was expected, so that mistake is refused instead of loading the cell as a value.
"""

from __future__ import annotations

from typing import Any

from weir.errors import StateError
from weir.trident.state import StateType
from weir.trident.state.values import current_value

__all__ = ["CELL_FIELDS", "cell_value", "dumped_cell_value", "looks_dumped"]

#: the fields of a dumped cell, per map-state type (a non-transactional value is shown as itself)
CELL_FIELDS: dict[StateType, frozenset[str]] = {
    StateType.OPAQUE: frozenset({"txid", "curr", "prev"}),
    StateType.TRANSACTIONAL: frozenset({"txid", "val"}),
}


cell_value = current_value


def looks_dumped(value: Any, state_type: StateType) -> bool:
    """Whether ``value`` has exactly the fields ``weir state dump`` shows for a cell of ``state_type``."""
    fields = CELL_FIELDS.get(state_type)
    return fields is not None and isinstance(value, dict) and set(value) == fields


def dumped_cell_value(value: Any, state_type: StateType, where: str) -> Any:
    """The current value of a cell as ``weir state dump`` printed it (``load --cells``).

    Raises
    ------
    StateError
        ``value`` is not a dumped cell of ``state_type`` (``where`` names the file and line).
    """
    fields = CELL_FIELDS.get(state_type)
    if fields is None:  # non-transactional: the dump shows the value itself
        return value
    if not looks_dumped(value, state_type):
        msg = (
            f"{where}: --cells expects a dumped {state_type.value} cell, an object with exactly the fields "
            f"{', '.join(sorted(fields))} (what `weir state dump` prints for this map state), got {value!r:.120}; "
            "load plain values without --cells"
        )
        raise StateError(msg)
    return value["curr"] if state_type is StateType.OPAQUE else value["val"]
