"""State: Storm's state API (``State``, ``KeyValueState``, ``StateProvider``), ``StateFactory`` and serializers.

The storage SPI (``Backend``) and the names weir's tools use to open stores are in
:mod:`weir.state.spi`.
"""

from weir.state.base import KeyValueState, State, StateProvider
from weir.state.factory import StateFactory
from weir.state.serializers import (
    BytesSerializer,
    FloatSerializer,
    IntSerializer,
    JsonSerializer,
    PickleSerializer,
    Serializer,
    StrSerializer,
)

__all__ = [
    "BytesSerializer",
    "FloatSerializer",
    "IntSerializer",
    "JsonSerializer",
    "KeyValueState",
    "PickleSerializer",
    "Serializer",
    "State",
    "StateFactory",
    "StateProvider",
    "StrSerializer",
]

#: tools above this package offered from it: ``weir.state.read`` / ``read_changes`` are :mod:`weir.statedata`'s
#: (imported on first use, like the connectors' exports of :func:`weir.state.registry.exported`;
#: this package imports nothing above it)
_TOOLS = {"read": ("weir.statedata", "read"), "read_changes": ("weir.statedata", "read_changes")}


def __getattr__(name: str) -> object:
    tool = _TOOLS.get(name)
    if tool is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    import importlib

    return getattr(importlib.import_module(tool[0]), tool[1])
