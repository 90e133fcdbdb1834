"""Runtime configuration: Storm's and weir's keys parsed once, at submit time."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from weir.errors import ConfigError
from weir.state.config import default_state_dir

__all__ = ["RuntimeConfig", "WEIR_KEYS"]

WEIR_KEYS = {
    "weir.state.dir",
    "weir.spark.checkpoint.location",
    "weir.spark.master",
    "weir.batch.max.retries",
    "weir.checkpoint.retain",
    "weir.deadletter",
    "weir.spark.conf",
    "weir.trident.allow.inexact",
    "weir.restart.max",
    "weir.restart.backoff.ms",
}


def _int(conf: Mapping[str, Any], key: str, default: int, minimum: int) -> int:
    v = conf.get(key, default)
    if isinstance(v, str):
        with contextlib.suppress(ValueError):  # not a number: refused below, by key
            v = int(v.strip())
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        msg = f"{key} must be an integer ≥ {minimum}, got {v!r}"
        raise ConfigError(msg)
    return v


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
    deadletter : ``weir.deadletter``: None, a directory path, or ``state`` / ``namespace:NAME``
    max_task_parallelism : ``topology.max.task.parallelism`` (None = no cap)
    restart_max : ``weir.restart.max`` (default 5): consecutive query restarts after transient failures
    restart_backoff_ms : ``weir.restart.backoff.ms`` (default 1000): first wait before a restart, doubled
        per consecutive restart (see :mod:`weir.runtime.spark.supervision`)
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
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    restart_max: int = 5
    restart_backoff_ms: int = 1000

    @property
    def local(self) -> bool:
        """Whether Spark runs in local mode (one machine)."""
        return self.master.startswith("local")

    @classmethod
    def from_conf(cls, topology: str, conf: Mapping[str, Any]) -> RuntimeConfig:
        """Parse and validate ``conf``; unknown ``weir.*`` keys are refused (likely typos)."""
        if not isinstance(topology, str) or not topology or "/" in topology or topology.startswith("$"):
            msg = (
                f"topology name {topology!r} must be a non-empty string without '/' and not starting with '$'"
            )
            raise ConfigError(msg)
        for k in conf:
            if not isinstance(k, str):
                msg = f"configuration keys must be strings, got {k!r}"
                raise ConfigError(msg)
            if k.startswith("weir.") and k not in WEIR_KEYS:
                msg = f"unknown configuration key {k!r}; weir's keys are {', '.join(sorted(WEIR_KEYS))}"
                raise ConfigError(msg)
        state_dir = default_state_dir(conf)
        ckpt = str(conf.get("weir.spark.checkpoint.location") or os.path.join(state_dir, "spark", topology))
        if ":" not in ckpt.split("/", 1)[0]:
            ckpt = os.path.abspath(ckpt)  # relative to the driver's directory, not to the JVM's
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
        master = conf.get("weir.spark.master", "local[*]")
        if not isinstance(master, str) or not master:
            msg = f"weir.spark.master must be a Spark master URL, got {master!r}"
            raise ConfigError(msg)
        return cls(
            topology=topology,
            interval_ms=_int(conf, "topology.state.checkpoint.interval.ms", 1000, 0),
            max_retries=_int(conf, "weir.batch.max.retries", 3, 0),
            state_dir=state_dir,
            checkpoint_location=str(ckpt),
            master=master,
            deadletter=dl,
            max_task_parallelism=None if mtp is None else _int(conf, "topology.max.task.parallelism", 1, 1),
            checkpoint_retain=_int(conf, "weir.checkpoint.retain", 2, 1),
            spark_conf={k: str(v) for k, v in spark_conf.items()},
            restart_max=_int(conf, "weir.restart.max", 5, 0),
            restart_backoff_ms=_int(conf, "weir.restart.backoff.ms", 1000, 0),
        )
