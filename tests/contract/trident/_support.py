"""Helpers shared by the backing-map tests."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

from weir.trident.backing import MapStateFactory

REPO = Path(__file__).resolve().parents[3]


def child_command(factory_path: Path, partition: int, partitions: int, batches: list[Any]) -> list[str]:
    """The command line running ``batches`` of the pickled factory in a fresh interpreter."""
    spec = {
        "factory": str(factory_path),
        "partition": partition,
        "partitions": partitions,
        "batches": batches,
    }
    return [sys.executable, "-m", "tests.contract.trident._child", json.dumps(spec)]


def dump_factory(factory: MapStateFactory, path: Path) -> Path:
    path.write_bytes(pickle.dumps(factory))
    return path


def run_child(factory_path: Path, partition: int, partitions: int, batches: list[Any]) -> list[Any]:
    """Run batches in a subprocess and return its ``multi_update`` results."""
    done = subprocess.run(
        child_command(factory_path, partition, partitions, batches),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def spawn_child(factory_path: Path, partition: int, partitions: int, batches: list[Any]) -> subprocess.Popen[str]:
    """Start batches in a subprocess (collect with ``communicate``)."""
    return subprocess.Popen(
        child_command(factory_path, partition, partitions, batches),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
