"""Pin the public surface of every public package: its ``__all__``, and that each name imports.

This is the one place the exported names are written down: change them deliberately, here. A new
top-level package under ``src/weir`` must be listed in :data:`PINS` (public) or :data:`INTERNAL`.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import weir

PINS: dict[str, set[str]] = {
    "weir": {
        "CheckpointError", "ConfigError", "FencedError", "SerializationError", "SourceError", "StateError",
        "StateLossError", "TopologyError", "WeirError", "__version__", "submit",
    },
    "weir.errors": {
        "CheckpointError", "ConfigError", "FencedError", "NotDurableWarning", "SerializationError", "SourceError",
        "SparkDiedError", "StateError", "StateLossError", "StoreUnavailableError", "TopologyError",
        "TransientSourceError", "WeirError",
    },
    "weir.testing": {"BatchResult", "BoltTester", "OperatorTester"},
    "weir.demo": {
        "SENTENCES", "SplitSentence", "WordCount", "generate_corpus", "input_dir_for", "read_counts",
        "wordcount_topology",
    },
    "weir.topology": {
        "BaseBasicBolt", "BaseRichBolt", "BaseRichSpout", "BaseStatefulBolt", "BaseStatefulWindowedBolt",
        "BaseWindowedBolt", "BasicBolt", "BasicOutputCollector", "Bolt", "BoltDeclarer", "ComponentSpec", "Count",
        "DEFAULT_STREAM", "Duration", "FailedException", "FailedTuple", "Fields", "Grouping", "GroupingKind",
        "Guarantee", "IBasicBolt", "IRichBolt", "IRichSpout", "IStatefulBolt", "IStatefulWindowedBolt",
        "IWindowedBolt", "OutputCollector", "OutputFieldsDeclarer", "Spout", "SpoutOutputCollector", "StatefulBolt",
        "StatefulWindowedBolt",
        "Subscription", "Topology", "TopologyBuilder", "TopologyContext", "Tuple", "TupleWindow", "Values",
        "WindowedBolt",
    },
    "weir.trident": {
        "Aggregator", "BackingMap", "BaseAggregator", "BaseFilter", "BaseFunction", "BaseQueryFunction",
        "BaseStateUpdater", "CachedMap", "CombinerAggregator", "Count", "Debug", "Filter", "FilterNull", "Function",
        "GroupedStream",
        "IBackingMap", "MapGet", "MapState", "MemoryMapState", "NonTransactionalMap", "OpaqueMap", "OpaqueValue",
        "Operation", "OperationContext", "QueryFunction", "ReducerAggregator", "SnapshotGet", "Snapshottable",
        "SnapshottableMap", "State", "StateFactory", "StateType", "StateUpdater", "Stream", "Sum",
        "TransactionalMap", "TransactionalValue", "TridentCollector", "TridentState", "TridentTopology",
        "TridentTuple",
    },
    "weir.trident.state": {
        "BackingMap", "CachedMap", "CombinerValueUpdater", "Key", "MapState", "MemoryBackingMap", "MemoryMapState",
        "NonTransactionalMap", "OpaqueMap", "OpaqueValue", "ReadOnlyMapState", "ReducerValueUpdater",
        "RemovableMapState", "ReplaceUpdater", "Snapshottable", "SnapshottableMap", "State", "StateFactory",
        "StateType", "SupportsCombine", "SupportsReduce", "TransactionalMap", "TransactionalValue", "ValueUpdater",
        "as_key", "as_keys", "is_exactly_once",
    },
    "weir.trident.backing": {
        "DEFAULT_GLOBAL_KEY", "HBaseBackingMap", "HBaseMapState", "HBaseMapStore", "MapStateFactory",
        "MapStateFamily", "MapStore", "MemcachedBackingMap", "MemcachedMapState", "MemcachedMapStore",
        "PostgresBackingMap", "PostgresMapState", "PostgresMapStore", "RedisBackingMap", "RedisMapState",
        "RedisMapStore", "SnapshottableNonTransactionalMap", "SnapshottableOpaqueMap",
        "SnapshottableTransactionalMap", "SqliteBackingMap", "SqliteMapState", "SqliteMapStore",
        "close_connections",
    },
    "weir.streams": {
        "Checkpoint", "ConsistentRegionContext", "DelegateStateHandler", "InputPort", "Operator", "OperatorContext",
        "OrderedStateHandlers", "Punctuation", "SortedTupleWindow", "StateHandler", "StatefulWindowListener",
        "TumblingWindowSort", "WindowEvent", "load_checkpoint",
    },
    "weir.state": {
        "BytesSerializer", "FloatSerializer", "IntSerializer", "JsonSerializer", "KeyValueState",
        "PickleSerializer", "Serializer", "State", "StateFactory", "StateProvider", "StrSerializer",
    },
    "weir.state.spi": {
        "Backend", "KeyValueStateProvider", "ProviderConfig", "StatePhase", "TransactionalKeyValueState",
        "TxidRecord", "open_backend", "parse_provider_config",
    },
    "weir.sources": {
        "DataFrameSpout", "FileSpout", "Guarantee", "KafkaSpout", "NatsSpout", "RabbitMQSpout", "RateSpout",
        "ReadLimit", "RedisQueueSpout", "RedisStreamSpout", "ReplayableSpout",
    },
    "weir.sinks": {"KafkaBolt", "KafkaState", "KafkaStateFactory", "KafkaStateUpdater", "TransactionalPublisher"},
    "weir.ui": {"Snapshot", "StoreReader", "UiServer", "create_app"},
    "weir.connectors": set(),
    "weir.connectors.hbase": {"CONNECTOR", "HBaseBackend", "HBaseSettings", "open_backend"},
    "weir.connectors.kafka": {"CONNECTOR"},
    "weir.connectors.memcached": {"CONNECTOR"},
    "weir.connectors.nats": {"CONNECTOR"},
    "weir.connectors.rabbitmq": {"CONNECTOR"},
    "weir.connectors.postgres": {"CONNECTOR", "PostgresBackend", "PostgresOptions", "open_backend", "redact_url"},
    "weir.connectors.redis": {
        "COMMIT_CHUNK", "CONNECTOR", "INLINE_LIMIT", "RedisBackend", "RedisSettings", "open_backend", "redis_client",
    },
    "weir.connectors.sqlite": {
        "CONNECTOR", "MERGE_ROWS", "SqliteBackend", "SqliteOptions", "open_backend", "path_from_url",
    },
    "weir.statedata": {
        "CHANGE_COLUMNS", "COLUMNS", "ComponentState", "KeyLocation", "StateReadConflictError", "find_key", "read",
        "read_changes", "resolve",
    },
    "weir.state.registry": {
        "BUILTIN_MODULES", "CONNECTORS_PACKAGE", "Connector", "connector", "connector_for_kind",
        "connector_for_scheme", "connector_for_storm_class", "connectors", "exported", "exported_names",
        "lazy_attrs", "names", "providers", "register", "storm_providers",
    },
    "weir.streamparse": {
        "ENVIRONMENT_KEY", "StreamparseBolt", "StreamparseSpout", "StreamparseStatefulBolt", "WithState",
        "is_streamparse_topology", "to_topology", "topology_conf",
    },
    "weir.flux": {"STORM_CLASSES", "FluxError", "FluxTopology", "load_flux"},
    "weir.drpc": {"Client", "DRPCError", "DRPCExecutionError", "DRPCTimeoutError", "DRPCUnknownFunctionError"},
}  # fmt: skip
"""Every public package (and public module users import from) → the names it exports."""

INTERNAL = {"weir.checkpoint", "weir.cli", "weir.runtime"}
"""Top-level packages that are weir's machinery, not a user API (no pinned surface)."""

NOT_FROM_WEIR = {
    "__version__", "DEFAULT_STREAM", "DEFAULT_GLOBAL_KEY", "SENTENCES", "Key", "CONNECTOR", "BUILTIN_MODULES",
    "CONNECTORS_PACKAGE", "COMMIT_CHUNK", "INLINE_LIMIT", "MERGE_ROWS", "ENVIRONMENT_KEY", "STORM_CLASSES",
    "COLUMNS", "CHANGE_COLUMNS",
}  # fmt: skip
"""Exported values that are plain data or type aliases, not classes or functions defined in weir."""


@pytest.mark.parametrize("package", sorted(PINS))
def test_all_is_pinned_and_every_name_imports(package: str) -> None:
    module = importlib.import_module(package)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), f"duplicate names in {package}.__all__"
    assert set(exported) == PINS[package], (
        f"{package}.__all__ changed: added {sorted(set(exported) - PINS[package])}, "
        f"removed {sorted(PINS[package] - set(exported))}"
    )
    star: dict[str, object] = {}
    exec(f"from {package} import *", star)  # noqa: S102 - the star import users may write
    for name in exported:
        assert name in star, f"from {package} import * does not give {name!r}"
        obj = getattr(module, name)
        if name not in NOT_FROM_WEIR and (isinstance(obj, type) or callable(obj)):
            assert getattr(obj, "__module__", "").startswith("weir"), f"{package}.{name} comes from {obj.__module__}"


def test_every_top_level_package_is_pinned_or_internal() -> None:
    root = Path(weir.__file__).parent
    packages = {f"weir.{m.name}" for m in pkgutil.iter_modules([str(root)]) if m.ispkg and not m.name.startswith("_")}
    unknown = packages - set(PINS) - INTERNAL
    assert not unknown, f"new public package(s) {sorted(unknown)}: pin their __all__ here (or list them as INTERNAL)"


def test_version_is_a_string() -> None:
    assert isinstance(weir.__version__, str) and weir.__version__.count(".") >= 1
