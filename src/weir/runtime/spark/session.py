"""Getting a SparkSession set up the way weir needs it."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from weir._redact import SPARK_REDACTION_REGEX, SPARK_STRING_REDACTION_REGEX

__all__ = ["ensure_python_env", "get_spark"]


def ensure_python_env() -> None:
    """Point Spark's Python workers at this interpreter (else they start whatever python3 is on PATH)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if os.environ.get("WEIR_CRASH_AT"):
        # crash tests: executor-side crash points kill the driver's process group (PySpark's
        # daemon gives workers a group of their own)
        os.environ.setdefault("WEIR_CRASH_PGID", str(os.getpgid(0)))


def get_spark(master: str, app_name: str, extra: Mapping[str, Any] | None = None) -> Any:
    """The active SparkSession, or a new one on ``master`` with the UI off and few shuffle partitions."""
    ensure_python_env()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    b = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.python.worker.reuse", "true")
        .config("spark.ui.showConsoleProgress", "false")
        # hide credentials on the UI's environment page and in event logs: Kafka/NATS/store secrets
        # by key, and the userinfo of any URL inside a value
        .config("spark.redaction.regex", SPARK_REDACTION_REGEX)
        .config("spark.redaction.string.regex", SPARK_STRING_REDACTION_REGEX)
    )
    for k, v in (extra or {}).items():
        b = b.config(k, str(v))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
