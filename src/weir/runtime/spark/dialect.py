"""How a topology API plugs into the engine: the :class:`Dialect` protocol and ``submit``.

A dialect (Storm's ``TopologyBuilder``, ``TridentTopology``) turns a submitted topology into the
three things the engine runs (the model: PySpark's ``DataSourceStreamReader`` — required methods
abstract, optional ones with defaults):

* :meth:`Dialect.prepare` — every submit-time check; returns a :class:`Prepared` plan (required);
* :meth:`Dialect.spouts` — the sources of the run's one streaming query (required);
* :meth:`Dialect.batch_runner` — the :class:`BatchRunner` of a micro-batch (required);
* :meth:`Dialect.participants` — the coordinator's :class:`~weir.checkpoint.coordinator.Participants`,
  or None for a run without a coordinator (default: None);
* :meth:`Dialect.parallelism`, :meth:`Dialect.shape` — what the coordinator stores (defaults: none).

Dialects register themselves (:func:`register_dialect`) when their sub-package of
``weir.runtime.spark`` is imported; :func:`submit` asks each registered dialect whether it
:meth:`~Dialect.accepts` the topology. This module imports no dialect.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from weir.checkpoint.coordinator import Participants
from weir.checkpoint.rescale import Rescaler
from weir.errors import ConfigError, TopologyError
from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.runner import BatchRunner, TopologyRun, make_coordinator
from weir.runtime.spark.session import is_connect
from weir.state.base import StateProvider

__all__ = ["BatchRunner", "Dialect", "Prepared", "dialect_for", "register_dialect", "submit"]


@dataclass
class Prepared:
    """A topology checked at submit time: what the engine needs to build its run.

    Dialects subclass it with their own plan (task specs, compiled nodes, ...).
    """

    name: str
    conf: Mapping[str, Any]
    rc: RuntimeConfig
    #: the SparkSession the run uses, and its master URL
    spark: Any
    master: str
    #: the topology's state provider (None for a stateless topology)
    provider: StateProvider | None


class Dialect(ABC):
    """One topology API on the engine. Subclass it and :func:`register_dialect` an instance."""

    #: a short name (``storm``, ``trident``), used in messages
    name: str = ""
    #: the state keys (``weir.state.ttl.ms``, ``weir.state.value.type``) this dialect's states honour
    state_keys: frozenset[str] = frozenset()

    @abstractmethod
    def accepts(self, topology: object) -> bool:
        """Whether ``topology`` is this dialect's."""

    @abstractmethod
    def prepare(self, name: str, conf: Mapping[str, Any], topology: Any, rc: RuntimeConfig, spark: Any) -> Prepared:
        """Check everything that can be checked before a worker runs; start (or take) Spark."""

    @abstractmethod
    def spouts(self, plan: Prepared) -> list[tuple[str, Any]]:
        """``(id, spout)`` of the sources read by the run's streaming query."""

    @abstractmethod
    def batch_runner(self, plan: Prepared) -> BatchRunner:
        """What runs a micro-batch."""

    def participants(self, plan: Prepared) -> Participants | None:
        """The coordinator's participants; None (the default) runs without a coordinator."""
        return None

    def parallelism(self, plan: Prepared) -> Mapping[str, int]:
        """The parallelism of each stateful component (the store refuses a changed one); none by default."""
        return {}

    def shape(self, plan: Prepared, namespaces: list[str]) -> Mapping[str, Any] | None:
        """The topology's graph as JSON-ready data for ``weir ui``; None by default."""
        return None

    def rescaler(self, plan: Prepared) -> Rescaler | None:
        """What re-partitions a stateful component whose parallelism changed; None (default) refuses it."""
        return None

    def encodings(self, plan: Prepared) -> Mapping[str, Any]:
        """Name → :class:`~weir.state.evolution.Encoding` of the states to record and check; none by default."""
        return {}

    def check_initial_state(self, plan: Prepared, initial: Mapping[str, Any]) -> bool:
        """Check ``initial_state`` at submit, before anything is written; True when this dialect loads it.

        The default (False) leaves it to the Storm bolts' loader (:mod:`weir.runtime.spark.bootstrap`).
        """
        return False

    def seed_initial_state(  # noqa: B027 - optional hook
        self, plan: Prepared, coordinator: Any, initial: Mapping[str, Any] | None
    ) -> None:
        """After the coordinator started, before the first batch: finish an interrupted load, then load ``initial``.

        Called at every start (``initial`` None or empty when the user passed none); the default does nothing.
        """

    def connect_refusal(self, name: str, topology: Any, rc: RuntimeConfig) -> str | None:
        """Why ``topology`` cannot run on a Spark Connect session; None when it can.

        The default refuses: a dialect whose runtime is not written for Connect (RDD stages, job-local
        properties, accumulators, ``_jvm``) must not half-run there. A dialect that runs over Connect
        overrides this.
        """
        return (
            f"the {self.name or type(self).__name__} runtime builds its stages with SparkContext APIs "
            "(job-local properties, accumulators, RDDs) that a Spark Connect client does not have"
        )


_DIALECTS: list[Dialect] = []


def register_dialect(dialect: Dialect) -> Dialect:
    """Make ``dialect`` known to :func:`submit` (once per class); returns it."""
    if not any(type(d) is type(dialect) for d in _DIALECTS):
        _DIALECTS.append(dialect)
    return dialect


def dialect_for(name: str, topology: object) -> Dialect:
    """The registered dialect of ``topology``; a :class:`TopologyError` when none accepts it."""
    for d in _DIALECTS:
        if d.accepts(topology):
            return d
    msg = (
        f"submit({name!r}): expected a topology from TopologyBuilder.create_topology() or a TridentTopology, "
        f"got {type(topology).__name__}"
    )
    raise TopologyError(msg, topology=name)


def submit(
    name: str, conf: Mapping[str, Any], topology: Any, spark: Any = None, initial_state: Mapping[str, Any] | None = None
) -> TopologyRun:
    """Validate ``topology`` with ``conf`` and prepare its streaming query (not started yet).

    Everything that can be checked before a worker runs is checked here, by the topology's
    dialect; then the coordinator (when the dialect has participants) is started on the store, and
    ``initial_state`` (component → rows, see :mod:`weir.runtime.spark.bootstrap`) is loaded.
    """
    from weir.checkpoint.encoding import check_encodings, record_encodings
    from weir.runtime.spark.bootstrap import check_initial_state, component_encodings, seed_initial_state

    dialect = dialect_for(name, topology)
    rc = RuntimeConfig.from_conf(name, conf)
    _refuse_storm_only_keys(name, conf, topology, dialect.state_keys)
    if rc.remote is not None or (spark is not None and is_connect(spark)):
        reason = dialect.connect_refusal(name, topology, rc)
        if reason is not None:
            where = rc.remote or "the given Spark Connect session"
            msg = (
                f"topology {name!r} ({dialect.name} dialect) cannot run over Spark Connect ({where}): {reason}. "
                "Run it on classic PySpark instead (weir.spark.master / --master, without weir.spark.remote, "
                "--remote or $SPARK_REMOTE)"
            )
            raise TopologyError(msg, topology=name)
    plan = dialect.prepare(name, conf, topology, rc, spark)
    own_initial = bool(initial_state) and dialect.check_initial_state(plan, initial_state or {})
    if initial_state and not own_initial:
        check_initial_state(name, topology, plan.provider, initial_state)
    encodings = component_encodings(name, conf, topology, plan.provider) or dict(dialect.encodings(plan))
    if encodings:  # a changed encoding is refused (or allowed) by the rules before anything is written
        check_encodings(plan.provider.backend, name, encodings)  # type: ignore[union-attr]
    runner = dialect.batch_runner(plan)
    participants = dialect.participants(plan)
    coordinator = None
    namespaces: list[str] = []
    if participants is not None:
        assert plan.provider is not None
        namespaces = participants.namespaces()
        coordinator = make_coordinator(
            name,
            conf,
            plan.provider,
            participants,
            dialect.parallelism(plan),
            rc,
            plan.master,
            shape=dialect.shape(plan, namespaces),
            spouts=dialect.spouts(plan),
            rescaler=dialect.rescaler(plan),
        )
        seed_initial_state(name, topology, plan.provider, coordinator, None if own_initial else initial_state)
        dialect.seed_initial_state(plan, coordinator, initial_state if own_initial else None)
        if encodings:
            record_encodings(coordinator.store.backend, name, encodings, coordinator.epoch)
    return TopologyRun(
        name,
        conf,
        rc,
        plan.spark,
        dialect.spouts(plan),
        runner,
        coordinator,
        provider=plan.provider,
        state_namespaces=namespaces,
    )


def _refuse_storm_only_keys(name: str, conf: Mapping[str, Any], topology: Any, honoured: frozenset[str]) -> None:
    """``weir.state.ttl.ms`` and ``weir.state.value.type`` apply to Storm bolts' key-value state (and ``honoured``)."""
    from weir.topology import Topology

    if isinstance(topology, Topology):
        return
    for key in ("weir.state.ttl.ms", "weir.state.value.type"):
        if conf.get(key) is not None and key not in honoured:
            msg = (
                f"topology {name!r}: {key} applies to the key-value state of Storm stateful and windowed bolts; "
                f"a {type(topology).__name__}'s map states do not support it yet (remove the key)"
            )
            raise ConfigError(msg)
