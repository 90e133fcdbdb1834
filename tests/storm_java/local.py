"""Apache Storm itself, for the tests and bench/vs_storm.py: its jars, our Java sources compiled, LocalCluster runs.

The jars are fetched by ``.ci/setup.d/60-storm.sh`` into ``$WEIR_CACHE/storm-<version>/`` (never in
git); the Java sources in ``tests/storm_java/src`` (a stateful word count and a sample encoder) are
compiled here with ``javac`` into a directory of the caller's choosing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCES = sorted((HERE / "src").rglob("*.java"))
STORM_VERSION = re.search(r"<storm\.version>(.+?)</storm\.version>", (HERE / "pom.xml").read_text()).group(1)  # type: ignore[union-attr]


def storm_jars() -> Path:
    """``$WEIR_CACHE/storm-<version>`` (FileNotFoundError naming the setup script when it is missing)."""
    cache = Path(os.environ.get("WEIR_CACHE") or Path.home() / ".cache" / "weir")
    jars = cache / f"storm-{STORM_VERSION}"
    if not (jars / ".complete").exists():
        msg = f"Apache Storm {STORM_VERSION}'s jars are not in {jars}: run `bash .ci/setup.d/60-storm.sh`"
        raise FileNotFoundError(msg)
    return jars


def java_missing() -> str | None:
    """Why Storm cannot run here (no jars, no javac/java), or None."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    try:
        storm_jars()
    except FileNotFoundError as exc:
        return str(exc)
    return None


def compile_sources(dest: Path) -> Path:
    """``javac`` our Java sources against Storm's jars into ``dest``; returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    cp = f"{storm_jars()}/*"
    subprocess.run(["javac", "-nowarn", "-d", str(dest), "-cp", cp, *map(str, SOURCES)], check=True)
    return dest


def classpath(classes: Path) -> str:
    """Our classes, then every Storm jar."""
    return f"{classes}{os.pathsep}{storm_jars()}/*"


def start_wordcount(
    classes: Path,
    state: str,
    lines: Path,
    report: Path,
    log: Path,
    *,
    parallelism: tuple[int, int, int] = (1, 2, 2),
    max_spout_pending: int = 20_000,
    heap: str = "512m",
    rate: float = 0,
) -> subprocess.Popen[bytes]:
    """Start ``WordCountTopology`` in its own JVM (LocalCluster); ``state``: memory, redis:H:P or cluster:H:P,….

    ``rate`` > 0: the spout emits that many lines per second (for its complete latency, emit → ack).
    """
    cmd = [
        "java",
        f"-Xmx{heap}",
        f"-Dweir.max.spout.pending={max_spout_pending}",
        f"-Dweir.rate={rate}",
        "-cp",
        classpath(classes),
        "weir.stormtest.WordCountTopology",
        state,
        str(lines),
        str(report),
        *map(str, parallelism),
    ]
    return subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)


def finish(proc: subprocess.Popen[bytes], log: Path, report: Path, timeout: float = 600) -> dict[str, Any]:
    """Wait for a started run; its JSON report (RuntimeError with the log's tail when it failed)."""
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        code = -9
    if code != 0 or not report.exists():
        tail = log.read_text(errors="replace")[-4000:]
        msg = f"Storm's LocalCluster word count exited with {code}; the end of {log}:\n{tail}"
        raise RuntimeError(msg)
    data: dict[str, Any] = json.loads(report.read_text())
    return data


def encode_samples(classes: Path, out: Path) -> list[dict[str, str]]:
    """Run ``EncodeSamples``: what Storm's DefaultStateEncoder writes for sample values (hex)."""
    subprocess.run(
        ["java", "-cp", classpath(classes), "weir.stormtest.EncodeSamples", str(out)],
        check=True,
        capture_output=True,
    )
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
