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
