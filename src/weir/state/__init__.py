"""State: Storm's SPI (``State``, ``KeyValueState``, ``StateProvider``), providers and serializers."""

from weir.state.backend import Backend, TxidRecord
from weir.state.base import KeyValueState, State, StateProvider
from weir.state.config import ProviderConfig, parse_provider_config
from weir.state.factory import KeyValueStateProvider, StateFactory, open_backend
from weir.state.kv import Phase, TransactionalKeyValueState
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
    "Backend",
    "BytesSerializer",
    "FloatSerializer",
    "IntSerializer",
    "JsonSerializer",
    "KeyValueState",
    "KeyValueStateProvider",
    "Phase",
    "PickleSerializer",
    "ProviderConfig",
    "Serializer",
    "State",
    "StateFactory",
    "StateProvider",
    "StrSerializer",
    "TransactionalKeyValueState",
    "TxidRecord",
    "open_backend",
    "parse_provider_config",
]
