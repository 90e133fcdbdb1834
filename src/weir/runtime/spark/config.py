"""Runtime configuration: Storm's and weir's keys parsed once, at submit time."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from weir._util import flag, positive_int
from weir.errors import ConfigError
from weir.sources.backlog import batch_growth
from weir.state.config import ProviderConfig, default_state_dir, parse_provider_config, spark_checkpoint_location

__all__ = ["MAX_TOPOLOGY_NAME_BYTES", "RuntimeConfig", "WEIR_KEYS", "check_topology_name"]

WEIR_KEYS = {
    "weir.state.dir",
    "weir.spark.checkpoint.location",
    "weir.spark.master",
    "weir.spark.remote",
    "weir.batch.max.retries",
    "weir.checkpoint.retain",
    "weir.deadletter",
    "weir.spark.conf",
    "weir.trident.allow.inexact",
    "weir.streams.checkpoint.serializer",
    "weir.accept.state.loss",
    "weir.history.size",
    "weir.metrics.port",
    "weir.metrics.host",
    "weir.coordinator.url",
    "weir.restart.max",
    "weir.spout.batch.max.tuples",
    "weir.spout.poll.ahead",
    "weir.restart.backoff.ms",
    "weir.rescale",
    "weir.batch.clock",
    "weir.state.ttl.ms",
    "weir.state.ttl.sweep.max",
    "weir.state.value.type",
    "weir.state.changelog.retain",
    "weir.drpc.batch.max.requests",
    "weir.batch.grow.max",
    "weir.connect.share.workers",
}


def _int(conf: Mapping[str, Any], key: str, default: int, minimum: int) -> int:
    v = conf.get(key, default)
    if isinstance(v, str):
        with contextlib.suppress(ValueError):  # not a number: refused below, by key
            v = int(v.strip())
    return positive_int(v, key, minimum=minimum, expected=f"an integer ≥ {minimum}")


#: the longest topology name: it is a directory name (255 bytes on common file systems) with room to spare
MAX_TOPOLOGY_NAME_BYTES = 200


def check_topology_name(topology: object) -> str:
    """``topology`` when it is a safe name; else a ConfigError saying why.

    The name becomes a path component (Spark's checkpoint directory ``<state dir>/spark/<topology>``)
    and part of every namespace, so it must be a non-empty string that is not ``.`` or ``..``, holds
    no ``/``, backslash, NUL or other control character, encodes as UTF-8 in at most
    :data:`MAX_TOPOLOGY_NAME_BYTES` bytes and does not start with ``$`` (weir's own components).
    """
    if not isinstance(topology, str) or not topology:
        msg = f"topology name {topology!r} must be a non-empty string"
        raise ConfigError(msg)
    why = None
    if topology in (".", ".."):
        why = "is a relative directory name"
    elif topology.startswith("$"):
        why = "starts with '$' (reserved for weir's own components)"
    elif any(c in "/\\" or ord(c) < 32 or ord(c) == 127 for c in topology):
        why = "holds '/', '\\' or a control character"
    else:
        try:
            size = len(topology.encode())
        except UnicodeEncodeError:
            why = "holds a lone surrogate (not valid Unicode text)"
        else:
            if size > MAX_TOPOLOGY_NAME_BYTES:
                why = f"is {size} bytes long in UTF-8 (at most {MAX_TOPOLOGY_NAME_BYTES})"
    if why is not None:
        shown = ascii(topology) if len(topology) <= 80 else ascii(topology[:80]) + "..."
        msg = (
            f"topology name {shown} {why}: it names a directory (Spark's checkpoint) and the state "
            "namespaces, so it must be a safe path component; use letters, digits, '-', '_' or '.'"
        )
        raise ConfigError(msg)
    return topology


@dataclass(frozen=True)
class RuntimeConfig:
    """Validated runtime settings of one topology run.

    Attributes
    ----------
    interval_ms : trigger interval = ``topology.state.checkpoint.interval.ms`` (default 1000)
    max_retries : ``weir.batch.max.retries`` (default 3)
    state_dir : ``weir.state.dir`` (default ``./weir-state``)
    checkpoint_location : ``weir.spark.checkpoint.location`` (default ``<state_dir>/spark/<topology>``)
    master : ``weir.spark.master`` (default ``local[*]``)
    remote : ``weir.spark.remote`` or ``$SPARK_REMOTE``: a Spark Connect URL (``sc://HOST:PORT``); when
        set, the run is a Connect client of that server and ``master`` is not used
    deadletter : ``weir.deadletter``: None, a directory path, or ``state`` / ``namespace:NAME``
    max_task_parallelism : ``topology.max.task.parallelism`` (None = no cap)
    checkpoint_serializer : ``weir.streams.checkpoint.serializer``: ``data`` (default) or ``pickle``
        (Streams checkpoints may hold any picklable object; trusts whoever can write the store)
    accept_state_loss : ``weir.accept.state.loss`` (default False): start even when the store and
        Spark's checkpoint disagree (see :mod:`weir.runtime.spark.statecheck`)
    history_size : ``weir.history.size``: checkpoint history entries kept in the store (default 100, 0 = none)
    metrics_port : ``weir.metrics.port``: serve Prometheus metrics on this port (None = off, 0 = any free port)
    metrics_host : ``weir.metrics.host``: the address the metrics endpoint binds (default ``127.0.0.1``:
        the endpoint has no authentication; set ``0.0.0.0`` to let a remote Prometheus scrape it)
    coordinator_url : ``weir.coordinator.url``: the store of the coordinator record when the state
        provider is a custom ``StateProvider`` (None: ``<state_dir>/state.db``)
    message_timeout_secs : ``topology.message.timeout.secs`` (default 30, Storm's); the checkpoint
        interval must be below it (seeds 001 and 003), or it is refused here
    acking : False when ``topology.acker.executors`` is 0 (Storm's acking off: un-acked tuples commit)
    restart_max : ``weir.restart.max`` (default 5): consecutive query restarts after transient failures
    restart_backoff_ms : ``weir.restart.backoff.ms`` (default 1000): first wait before a restart, doubled
        per consecutive restart (see :mod:`weir.runtime.spark.supervision`)
    rescale : ``weir.rescale``: ``auto`` (default) re-partitions the state of a stateful component whose
        parallelism changed at submit (see :mod:`weir.checkpoint.rescale`); ``refuse`` refuses the change
    batch_grow_max : ``weir.batch.grow.max`` (default 1): a backlogged source's batch may grow to this
        many times its configured size (see :mod:`weir.sources.backlog`)
    connect_share_workers : ``weir.connect.share.workers`` (default True): over Spark Connect, start the
        streaming query so that its batches use the server's shared Python workers instead of a new set
        per query (see :func:`weir.runtime.spark.connect.start_with_shared_workers`)
    batch_clock : ``weir.batch.clock``: dotted path of a function ``txid -> ms`` giving a new transaction's
        time (state TTL decides expiry from it; default the wall clock; tests drive time with it)
    """

    topology: str
    interval_ms: int = 1000
    max_retries: int = 3
    state_dir: str = "./weir-state"
    checkpoint_location: str = ""
    master: str = "local[*]"
    deadletter: str | None = None
    max_task_parallelism: int | None = None
    checkpoint_retain: int = 2
    coordinator_url: str | None = None
    message_timeout_secs: int = 30
    acking: bool = True
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    checkpoint_serializer: str = "data"
    accept_state_loss: bool = False
    history_size: int = 100
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    restart_max: int = 5
    restart_backoff_ms: int = 1000
    allow_inexact: bool = False
    provider: ProviderConfig | None = field(default=None, repr=False)
    rescale: str = "auto"
    batch_clock: str | None = None
    remote: str | None = None
    batch_grow_max: int = 1
    connect_share_workers: bool = True

    @property
    def local(self) -> bool:
        """Whether Spark runs in local mode (one machine)."""
        return self.master.startswith("local")

    @classmethod
    def from_conf(cls, topology: str, conf: Mapping[str, Any]) -> RuntimeConfig:
        """Parse and validate ``conf``; unknown ``weir.*`` keys are refused (likely typos)."""
        check_topology_name(topology)
        for k in conf:
            if not isinstance(k, str):
                msg = f"configuration keys must be strings, got {k!r}"
                raise ConfigError(msg)
            if k.startswith("weir.") and k not in WEIR_KEYS:
                msg = f"unknown configuration key {k!r}; weir's keys are {', '.join(sorted(WEIR_KEYS))}"
                raise ConfigError(msg)
        state_dir = default_state_dir(conf)
        ckpt = spark_checkpoint_location(topology, conf)
        mtp = conf.get("topology.max.task.parallelism")
        dl = conf.get("weir.deadletter")
        if dl in ("", False, "off", None):
            dl = None
        elif not isinstance(dl, str):
            msg = f"weir.deadletter must be a directory path, 'state' or 'namespace:NAME', got {dl!r}"
            raise ConfigError(msg)
        spark_conf = conf.get("weir.spark.conf") or {}
        if not isinstance(spark_conf, Mapping) or not all(isinstance(k, str) for k in spark_conf):
            msg = (
                "weir.spark.conf must be a dict of Spark settings, e.g. {'spark.executor.memory': '2g'}, "
                f"got {spark_conf!r}"
            )
            raise ConfigError(msg)
        coord_url = conf.get("weir.coordinator.url") or None
        if coord_url is not None:
            from weir.state.config import provider_from_url

            if not isinstance(coord_url, str):
                msg = f"weir.coordinator.url must be a store URL string, got {coord_url!r}"
                raise ConfigError(msg)
            try:
                kind = provider_from_url(coord_url)
            except ConfigError as exc:
                msg = f"weir.coordinator.url: {exc}"
                raise ConfigError(msg) from exc
            if kind == "memory":
                msg = (
                    f"weir.coordinator.url {coord_url!r}: the coordinator record must outlive the driver; "
                    "use sqlite:///PATH, redis://, redis+cluster:// or postgresql://"
                )
                raise ConfigError(msg)
        master = conf.get("weir.spark.master", "local[*]")
        if not isinstance(master, str) or not master:
            msg = f"weir.spark.master must be a Spark master URL, got {master!r}"
            raise ConfigError(msg)
        from weir.runtime.spark.session import remote_url

        remote = remote_url(conf.get("weir.spark.remote"))
        if remote is not None and conf.get("weir.spark.remote") and "weir.spark.master" in conf:
            msg = (
                f"topology {topology!r}: both weir.spark.master ({master!r}) and weir.spark.remote ({remote!r}) "
                "are set; a run either starts Spark on a master or is a client of a Spark Connect server: drop one"
            )
            raise ConfigError(msg)
        ser = conf.get("weir.streams.checkpoint.serializer", "data")
        if ser not in ("data", "pickle"):
            msg = f"weir.streams.checkpoint.serializer must be 'data' (default) or 'pickle', got {ser!r}"
            raise ConfigError(msg)
        accept = conf.get("weir.accept.state.loss", False)
        if isinstance(accept, str) and accept.strip().lower() in ("true", "false"):
            accept = accept.strip().lower() == "true"
        if not isinstance(accept, bool):
            msg = f"weir.accept.state.loss must be true or false, got {accept!r}"
            raise ConfigError(msg)
        rescale = conf.get("weir.rescale", "auto")
        if rescale not in ("auto", "refuse"):
            msg = f"weir.rescale must be 'auto' (default: re-partition at submit) or 'refuse', got {rescale!r}"
            raise ConfigError(msg)
        metrics_port = None if conf.get("weir.metrics.port") is None else _int(conf, "weir.metrics.port", 0, 0)
        if metrics_port is not None and metrics_port > 65535:
            msg = f"weir.metrics.port must be a TCP port (0 = any free port), got {metrics_port!r}"
            raise ConfigError(msg)
        metrics_host = conf.get("weir.metrics.host", "127.0.0.1")
        if not isinstance(metrics_host, str) or not metrics_host:
            msg = f"weir.metrics.host must be an address to bind, e.g. 127.0.0.1, got {metrics_host!r}"
            raise ConfigError(msg)
        interval_ms = _int(conf, "topology.state.checkpoint.interval.ms", 1000, 0)
        timeout = _int(conf, "topology.message.timeout.secs", 30, 1)
        ackers = conf.get("topology.acker.executors")
        acking = ackers is None or _int(conf, "topology.acker.executors", 1, 0) > 0
        if acking and interval_ms >= timeout * 1000:
            msg = (
                f"topology {topology!r}: topology.state.checkpoint.interval.ms = {interval_ms} is not below "
                f"topology.message.timeout.secs = {timeout} ({timeout * 1000} ms); as in Storm, tuples would time "
                "out before their checkpoint commits. Lower the interval or raise the timeout"
            )
            raise ConfigError(msg)
        try:  # the one parse of the state provider's configuration; a bad one fails when a provider is needed
            provider: ProviderConfig | None = parse_provider_config(conf)
        except ConfigError:
            provider = None
        return cls(
            topology=topology,
            allow_inexact=flag(conf.get("weir.trident.allow.inexact", False), "weir.trident.allow.inexact"),
            provider=provider,
            interval_ms=interval_ms,
            message_timeout_secs=timeout,
            acking=acking,
            checkpoint_serializer=str(ser),
            accept_state_loss=accept,
            max_retries=_int(conf, "weir.batch.max.retries", 3, 0),
            state_dir=state_dir,
            checkpoint_location=str(ckpt),
            master=master,
            deadletter=dl,
            max_task_parallelism=None if mtp is None else _int(conf, "topology.max.task.parallelism", 1, 1),
            checkpoint_retain=_int(conf, "weir.checkpoint.retain", 2, 1),
            coordinator_url=coord_url,
            spark_conf={k: str(v) for k, v in spark_conf.items()},
            history_size=_int(conf, "weir.history.size", 100, 0),
            metrics_port=metrics_port,
            metrics_host=metrics_host,
            restart_max=_int(conf, "weir.restart.max", 5, 0),
            restart_backoff_ms=_int(conf, "weir.restart.backoff.ms", 1000, 0),
            rescale=str(rescale),
            batch_clock=_batch_clock(topology, conf.get("weir.batch.clock")),
            remote=remote,
            batch_grow_max=batch_growth(conf),
            connect_share_workers=flag(conf.get("weir.connect.share.workers", True), "weir.connect.share.workers"),
        )


def _batch_clock(topology: str, path: Any) -> str | None:
    """``weir.batch.clock``, checked at submit: a dotted path to a callable."""
    if path is None:
        return None
    from weir._util import import_object

    if not isinstance(path, str) or not callable(import_object(path)):
        msg = f"topology {topology!r}: weir.batch.clock = {path!r} must be the dotted path of a function txid -> ms"
        raise ConfigError(msg)
    return path
