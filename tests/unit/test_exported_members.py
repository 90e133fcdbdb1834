"""Pin the public surface: what ``weir``, ``weir.state`` and ``weir.state.spi`` export (change deliberately, here)."""

from __future__ import annotations

import weir
import weir.state
import weir.state.spi

WEIR = {
    "CheckpointError",
    "ConfigError",
    "FencedError",
    "SerializationError",
    "SourceError",
    "StateError",
    "StateLossError",
    "TopologyError",
    "WeirError",
    "__version__",
    "submit",
}

WEIR_STATE = {
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
}

WEIR_STATE_SPI = {
    "Backend",
    "KeyValueStateProvider",
    "ProviderConfig",
    "StatePhase",
    "TransactionalKeyValueState",
    "TxidRecord",
    "open_backend",
    "parse_provider_config",
}


def _check(module: object, expected: set[str]) -> None:
    exported = list(module.__all__)  # type: ignore[attr-defined]
    assert len(exported) == len(set(exported)), "duplicate names in __all__"
    assert set(exported) == expected
    for name in exported:
        assert hasattr(module, name), f"{module.__name__}.__all__ names {name!r}, which does not exist"  # type: ignore[attr-defined]


def test_weir_exports() -> None:
    _check(weir, WEIR)


def test_weir_state_exports() -> None:
    _check(weir.state, WEIR_STATE)


def test_weir_state_spi_exports() -> None:
    _check(weir.state.spi, WEIR_STATE_SPI)


def test_exported_objects_say_where_they_live() -> None:
    for module in (weir, weir.state, weir.state.spi):
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) or callable(obj):
                assert obj.__module__.startswith("weir"), f"{name} comes from {obj.__module__}"


def test_version_is_a_string() -> None:
    assert isinstance(weir.__version__, str) and weir.__version__.count(".") >= 1
