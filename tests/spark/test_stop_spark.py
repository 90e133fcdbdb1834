"""``stop_spark`` (the CLI's way out) leaves no py4j noise behind the JVM it stopped."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

_SCRIPT = textwrap.dedent(
    """
    import gc, logging, sys
    from pyspark.sql import SparkSession
    from weir.runtime.spark.session import stop_spark

    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    client = spark.sparkContext._gateway._gateway_client
    held = spark._jvm.java.util.ArrayList()  # a Java object Python still holds when the JVM goes
    stop_spark()
    print("connected after stop:", client.is_connected)
    del held
    gc.collect()
    try:  # what py4j logs when the exiting JVM does not answer a command
        raise ConnectionResetError("Connection reset by peer")
    except ConnectionResetError:
        logging.exception("Exception while sending command.")
        logging.exception("an error of the user's own")
    print("done")
    """
)


def test_after_stop_spark_no_java_object_is_sent_and_py4j_send_errors_are_not_printed() -> None:
    res = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "connected after stop: False" in res.stdout and "done" in res.stdout
    assert "Exception while sending command" not in res.stderr
    assert "ERROR:root:an error of the user's own" in res.stderr  # only py4j's one message is dropped
