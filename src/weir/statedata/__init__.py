"""State as data: read a topology's committed state into Spark, find the task and value of one key.

:func:`read` is also offered as ``weir.state.read`` (see :mod:`weir.state`). The package sits above
:mod:`weir.state`, :mod:`weir.checkpoint`, :mod:`weir.trident` and :mod:`weir.streams`, whose stored
layouts it reads; it writes nothing.
"""

from weir.statedata.errors import StateReadConflictError
from weir.statedata.feed import CHANGE_COLUMNS, read_changes
from weir.statedata.layout import ComponentState, KeyLocation, find_key, resolve
from weir.statedata.reader import COLUMNS, read

__all__ = [
    "CHANGE_COLUMNS",
    "COLUMNS",
    "ComponentState",
    "KeyLocation",
    "StateReadConflictError",
    "find_key",
    "read",
    "read_changes",
    "resolve",
]
