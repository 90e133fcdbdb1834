"""weir: Storm, Trident and IBM Streams state management in Python, on Spark Structured Streaming."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, overload

from weir.errors import (
    CheckpointError,
    ConfigError,
    FencedError,
    SerializationError,
    SourceError,
    StateError,
    StateLossError,
    TopologyError,
    WeirError,
)

__version__ = "0.1.0"


if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from weir.runtime.spark.runner import TopologyRun
    from weir.topology.builder import Topology
    from weir.trident.topology import TridentTopology


@overload
def submit(
    name: str,
    conf: Mapping[str, Any],
    topology: Topology,
    spark: SparkSession | None = None,
    *,
    initial_state: Mapping[str, Any] | None = None,
) -> TopologyRun: ...


@overload
def submit(
    name: str,
    conf: Mapping[str, Any],
    topology: TridentTopology,
    spark: SparkSession | None = None,
    *,
    initial_state: Mapping[str, Any] | None = None,
) -> TopologyRun: ...


@overload
def submit(
    name: str,
    conf: Mapping[str, Any],
    topology: type[Any],
    spark: SparkSession | None = None,
    *,
    initial_state: Mapping[str, Any] | None = None,
) -> TopologyRun: ...


def submit(
    name: str,
    conf: Mapping[str, Any],
    topology: Topology | TridentTopology | type[Any],
    spark: SparkSession | None = None,
    *,
    initial_state: Mapping[str, Any] | None = None,
) -> TopologyRun:
    """Submit a topology (Storm ``TopologyBuilder.create_topology()`` or ``TridentTopology``) to Spark.

    A subclass of ``streamparse.Topology`` (``weir[streamparse]``) is accepted too: its class-level
    ``config`` goes under ``conf`` (see :mod:`weir.streamparse`).

    Everything is validated now; returns a :class:`~weir.runtime.spark.runner.TopologyRun` whose
    ``start()`` runs it continuously and ``process_available()`` processes what is there and stops.
    The topology's dialect is found through the registry of :mod:`weir.runtime.spark.dialect`.
    ``initial_state`` (``{component: DataFrame of key, value}``) seeds Storm stateful bolts before the
    first batch (refused once the topology has committed state; see :mod:`weir.checkpoint.bootstrap`).
    """
    from weir.runtime.spark import submit as _submit
    from weir.streamparse import is_streamparse_topology, to_topology, topology_conf

    if is_streamparse_topology(topology):  # a streamparse.Topology subclass (weir[streamparse])
        conf = {**topology_conf(topology), **conf}
        topology = to_topology(topology, conf, name)
    return _submit(name, conf, topology, spark, initial_state=initial_state)


__all__ = [
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
]
