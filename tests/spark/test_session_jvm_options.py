"""JVM flags given in ``weir.spark.conf`` reach the JVM weir starts, and its start stays quiet."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCRIPT = """
from weir.runtime.spark.session import get_spark
spark = get_spark("local[1]", "weir-test-jvm-options",
                  {"spark.driver.extraJavaOptions": "-XX:+UseSerialGC -Dweir.test.flag=on"})
jvm = spark.sparkContext._jvm
args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
print("ARGS", " ".join(args))
print("FLAG", jvm.java.lang.System.getProperty("weir.test.flag"))
spark.stop()
"""


def test_user_jvm_flags_are_kept_beside_the_quiet_log_config() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("WEIR_VERBOSE", "SPARK_SUBMIT_OPTS", "SPARK_CONF_DIR")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    args = next(ln for ln in done.stdout.splitlines() if ln.startswith("ARGS ")).split()
    assert "-XX:+UseSerialGC" in args
    assert any(a.startswith("-Dlog4j2.configurationFile=file:") and "weir-log4j2-quiet" in a for a in args)
    assert "FLAG on" in done.stdout
    # the quiet start: no log4j profile banner, no WARN lines of Spark's start-up
    assert "Setting default log level" not in done.stderr
    assert "WARN" not in done.stderr, done.stderr[-2000:]
