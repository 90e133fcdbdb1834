"""Helpers of the provider contract suite: parameters, namespaces, independent readers, subprocesses."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from tests.servers import DURABLE_PROVIDERS, PROVIDERS
from weir.state import StateFactory
from weir.state.factory import open_backend
from weir.state.spi import KeyValueStateProvider, TransactionalKeyValueState, TxidRecord

_NEEDS_SERVER = {"redis", "redis-cluster", "postgres", "hbase", "hbase-rows"}


def provider_params(kinds: Sequence[str] = PROVIDERS) -> list[Any]:
    """``pytest.param`` per provider set-up, marked ``services`` when it needs a server."""
    return [pytest.param(k, id=k, marks=[pytest.mark.services] if k in _NEEDS_SERVER else []) for k in kinds]


ALL = pytest.mark.parametrize("provider_url", provider_params(), indirect=True)
"""Run a test against every provider set-up."""

DURABLE = pytest.mark.parametrize("provider_url", provider_params(DURABLE_PROVIDERS), indirect=True)
"""Run a test against the providers whose data outlives the process."""

ALL_LAYOUTS = pytest.mark.parametrize("provider_url", provider_params((*PROVIDERS, "hbase-rows")), indirect=True)
""":data:`ALL`, and HBase's row-per-key layout beside its default (bucketed) one."""

DURABLE_LAYOUTS = pytest.mark.parametrize(
    "provider_url", provider_params((*DURABLE_PROVIDERS, "hbase-rows")), indirect=True
)
""":data:`DURABLE`, and HBase's row-per-key layout beside its default (bucketed) one."""


def new_ns(prefix: str = "contract") -> str:
    """A namespace nobody used before, in weir's ``<topology>-<component>-<task>`` form."""
    return f"{prefix}-bolt{uuid.uuid4().hex[:10]}-0"


def provider_of(url: str, **options: Any) -> KeyValueStateProvider:
    """``StateFactory.from_url(url, **options)``."""
    return StateFactory.from_url(url, **options)


@contextmanager
def independent_reader(provider: KeyValueStateProvider, namespace: str) -> Iterator[TransactionalKeyValueState]:
    """A state of ``namespace`` over a *new* backend (its own connections), closed afterwards.

    A same-connection reader could see a writer's open SQL transaction; this one cannot.
    """
    template = provider.new_state(namespace)
    backend = open_backend(provider.config, fresh=True)
    try:
        yield TransactionalKeyValueState(backend, namespace, template.key_serializer, template.value_serializer)
    finally:
        backend.close()


def committed(provider: KeyValueStateProvider, namespace: str) -> dict[Any, Any]:
    """What another reader sees in ``namespace`` (through its own connection)."""
    with independent_reader(provider, namespace) as reader:
        return dict(reader)


def txids(provider: KeyValueStateProvider, namespace: str) -> TxidRecord:
    """The txid record of ``namespace``, read over a new connection."""
    backend = open_backend(provider.config, fresh=True)
    try:
        return backend.txids(namespace)
    finally:
        backend.close()


def view(state: Any) -> dict[Any, Any]:
    """Iterate a state into a dict, asserting that every key comes exactly once."""
    out: dict[Any, Any] = {}
    for k, v in state:
        assert k not in out, f"key {k!r} was yielded twice by iteration"
        out[k] = v
    return out


# ---- subprocesses ----------------------------------------------------------------------------
def spawn(script: str, *args: str) -> subprocess.Popen[str]:
    """Run ``python -c script args...`` with this interpreter; stdout is a text pipe."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def read_line(proc: subprocess.Popen[str], timeout: float = 60.0) -> str:
    """The next stdout line of ``proc``, failing with its stderr if it exits or times out first."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"subprocess printed nothing in {timeout}s; stderr:\n{err}")
        ready, _, _ = select.select([proc.stdout], [], [], min(left, 0.5))
        if ready:
            line = proc.stdout.readline()
            if line:
                return line.rstrip("\n")
            _, err = proc.communicate()
            pytest.fail(f"subprocess exited with {proc.returncode} before printing; stderr:\n{err}")


def run_json(script: str, *args: str, timeout: float = 120.0) -> Any:
    """Run a script to completion and return the JSON it printed last."""
    proc = spawn(script, *args)
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"subprocess failed with {proc.returncode}:\n{err}"
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert lines, f"subprocess printed nothing; stderr:\n{err}"
    return json.loads(lines[-1])
