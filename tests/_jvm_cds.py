"""A class-data-sharing archive of Spark's classes for the tests' short-lived Spark JVMs.

Most of a crash driver's start is its JVM loading and verifying Spark's classes: every SIGKILL chain
starts 5-9 drivers, the CLI tests start more. Java's AppCDS maps classes already parsed and verified
from an archive instead. :func:`cds_opts` makes one dynamic archive (``-XX:ArchiveClassesAtExit``)
from a small Spark run, once per Java build + PySpark jars + JVM flags, under
``~/.cache/weir/cds/`` (``WEIR_CDS_DIR`` moves it), and returns the flags that use it; they are
appended to ``SPARK_SUBMIT_OPTS`` by ``tests/conftest.py``, so the ``spark`` session, every crash
driver and every CLI child read it.

Measured on the 2-core CI machine (``bench/suite_jvm_flags.py`` runs the same comparison on a clean
``tests/crash/storm_driver.py`` run): a SparkSession start plus its first Python job took 8.8-9.9 s of
CPU (the whole process tree) without the archive and 4.6-5.0 s with it.

Nothing changes what a test checks: a JVM whose class path does not match the archive (another
``SPARK_CONF_DIR``, extra class path entries) silently loads its classes as usual (the ``cds`` log
tags are off, so no warning reaches a test's stderr). ``WEIR_TEST_CDS=0`` turns the archive off;
a failure to build it is reported on stderr and the run goes on without it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

#: JVM log tags that would print CDS warnings (a class path mismatch, classes left out at dump time)
QUIET = "-Xlog:cds=off,cds+dynamic=off"

#: the Spark work the archive is dumped after: a session, a Python job, SQL with a shuffle, a Python
#: UDF and a foreachBatch streaming query, made as weir makes them (``get_spark``)
_WORKLOAD = r"""
import sys, tempfile
from pathlib import Path
from weir.runtime.spark.session import get_spark
from pyspark import SparkContext
from pyspark.sql import functions as F

spark = get_spark("local[2]", "weir-tests-cds")
proc = SparkContext._gateway.proc
spark.range(100).rdd.map(lambda x: x).count()
df = spark.range(1000).withColumn("k", F.col("id") % 7)
df.groupBy("k").count().collect()
spark.udf.register("plus1", lambda x: x + 1, "long")
spark.sql("SELECT plus1(id) AS v FROM range(10)").collect()
with tempfile.TemporaryDirectory() as d:
    (Path(d) / "in").mkdir()
    (Path(d) / "in" / "f0.txt").write_text("a b\nc\n")
    q = (
        spark.readStream.text(str(Path(d) / "in"))
        .writeStream.foreachBatch(lambda b, i: b.groupBy("value").count().collect())
        .option("checkpointLocation", str(Path(d) / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(240)
spark.stop()
proc.stdin.close()  # the JVM exits when its stdin closes, writing the archive on the way out
proc.wait(240)
"""


def _key(base_opts: str) -> str | None:
    """What the archive depends on: the Java build, PySpark's jars, the JVM flags (None: no java)."""
    java = shutil.which("java")
    if java is None:
        return None
    try:
        import pyspark
    except ImportError:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    version = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False).stderr
    listing = sorted(f"{p.name}:{p.stat().st_size}" for p in jars.glob("*.jar"))
    h = hashlib.sha256("\n".join([os.path.realpath(java), version, str(jars), base_opts, *listing]).encode())
    return h.hexdigest()[:16]


def cds_opts(base_opts: str) -> str:
    """JVM flags that map the shared archive for ``base_opts`` (made first if missing), or ``""``."""
    if os.environ.get("WEIR_TEST_CDS", "1") == "0":
        return ""
    try:
        key = _key(base_opts)
    except (OSError, subprocess.SubprocessError):
        return ""
    if key is None:
        return ""
    folder = Path(os.environ.get("WEIR_CDS_DIR") or Path.home() / ".cache" / "weir" / "cds")
    archive = folder / f"spark-{key}.jsa"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"spark-{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one maker; the other pytest processes wait for it
            if not archive.exists():
                _make(archive, base_opts)
    except OSError as exc:
        print(
            f"tests/_jvm_cds.py: no class-data-sharing archive ({exc}); Spark JVMs start without one", file=sys.stderr
        )
        return ""
    return f"-XX:SharedArchiveFile={archive} {QUIET}" if archive.exists() else ""


def _make(archive: Path, base_opts: str) -> None:
    tmp = archive.with_suffix(f".{os.getpid()}.tmp")
    env = {
        **os.environ,
        "SPARK_SUBMIT_OPTS": f"{base_opts} -XX:ArchiveClassesAtExit={tmp} {QUIET}".strip(),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    env.pop("WEIR_CRASH_AT", None)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _WORKLOAD], env=env, capture_output=True, text=True, timeout=600, check=False
        )
    except subprocess.TimeoutExpired:
        tmp.unlink(missing_ok=True)
        print(f"tests/_jvm_cds.py: making {archive} timed out; Spark JVMs start without it", file=sys.stderr)
        return
    if proc.returncode != 0 or not tmp.exists() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        print(
            f"tests/_jvm_cds.py: making {archive} failed (rc={proc.returncode}); Spark JVMs start without it:\n"
            f"{proc.stderr[-2000:]}",
            file=sys.stderr,
        )
        return
    tmp.replace(archive)
