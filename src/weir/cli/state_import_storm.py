"""``weir state import-storm``: take over the key-value state Apache Storm wrote through storm-redis.

Apache Storm's ``RedisKeyValueStateProvider`` keeps a stateful bolt task's state in three Redis
keys named after the task, ``<component>-<task id>`` (no topology name; ``<task id>`` is Storm's
global task id): the hash ``ns`` of committed rows, the hash ``ns$prepare`` of a prepared change
set, and the hash ``ns$txid`` with fields ``commit`` and ``prepare`` (decimal text). Keys and
values are Kryo bytes of ``DefaultStateSerializer`` (:mod:`weir.cli.storm_kryo`), stored as they are
by Storm ≥ 1.1.1 and Base64-encoded by Storm ≤ 1.1.0 (both are read). The checkpoint spout keeps its
``CheckPointState`` (txid and phase) the same way in ``$checkpointspout-<task id>``.

The import, for a stopped Storm topology and a weir topology that has no state yet:

1. **read** every task namespace of the chosen Storm components (a prepared change set counts only
   when the checkpoint spout's record says ``COMMITTING`` that txid, as Storm's recovery would roll
   it forward; otherwise it is dropped, as Storm would roll it back) and **decode** every key and
   value; a row that cannot be decoded stops the import before anything is written, named with its
   namespace and key, unless ``--skip-unsupported`` (then it is left out and listed);
2. **route** each key to the weir task its fields grouping sends it to (``stable_hash(key) % N``,
   the same as ``weir state rescale``), serialized with the target store's serializers;
3. **write**, as weir's own checkpoint protocol does, fenced by a new epoch of the weir topology's
   coordinator record: record ``PREPARING(1)`` with an ``__import_storm`` marker row, every task's
   rows as the prepared change set of txid 1, record ``COMMITTING(1)``, commit every namespace,
   record ``COMMITTED(1)``. A SIGKILL before ``COMMITTING`` leaves nothing visible (the next weir
   start rolls it back, or a new import run starts over); after it the next start or import run
   rolls it forward;
4. **verify**: every weir namespace's key count and a SHA-256 over its sorted rows are compared
   with what was routed to it.

The weir topology then continues at txid 2. Storm's keys are only read, never changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from weir.cli._table import print_table
from weir.cli.storm_kryo import KryoUnsupported, decode_object, decode_state_value, storm_bytes
from weir.errors import ConfigError, StateError

__all__ = ["IMPORT_KEY", "StormNamespace", "StormRedis", "register"]

#: the marker row beside the weir coordinator record of an import (JSON: source, components)
IMPORT_KEY = b"__import_storm"
#: the txid the imported state is committed under
IMPORT_TXID = 1
#: rows per write
BATCH_ROWS = 5_000

_PHASES = ("COMMITTED", "COMMITTING", "PREPARING")  # the order of Storm's CheckPointState.State


@dataclass
class StormNamespace:
    """One Storm task namespace ``<component>-<task>`` as read from Redis."""

    component: str
    task: int
    committed: int | None
    prepared: int | None
    rows: dict[bytes, bytes]
    pending: dict[bytes, bytes]
    base64: bool = False

    @property
    def name(self) -> str:
        """``<component>-<task>``."""
        return f"{self.component}-{self.task}"


@dataclass
class _Plan:
    """What the import writes: per weir component, per task, serialized rows."""

    tasks: dict[str, list[dict[bytes, bytes]]] = field(default_factory=dict)
    source_keys: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    rolled_forward: list[str] = field(default_factory=list)
    dropped_prepared: list[str] = field(default_factory=list)


class StormRedis:
    """Read-only view of the Redis (or Redis Cluster) Storm's ``RedisKeyValueStateProvider`` wrote."""

    def __init__(self, url: str) -> None:
        from weir.connectors.redis.client import RedisSettings, redis_client

        self.settings = RedisSettings.from_url(url)
        self.client = redis_client(self.settings)

    def close(self) -> None:
        """Close the connections."""
        self.client.close()

    def describe(self) -> str:
        """The server, for messages (no password)."""
        return self.settings.describe()

    def _scan(self, pattern: bytes) -> Iterator[bytes]:
        if self.settings.cluster:
            conns = [self.client.get_redis_connection(n) for n in self.client.get_primaries()]
        else:
            conns = [self.client]
        for conn in conns:
            yield from conn.scan_iter(match=pattern, count=1000)

    def _txids(self, name: bytes) -> dict[str, int]:
        out: dict[str, int] = {}
        for f, v in self.client.hgetall(name + b"$txid").items():
            raw, _ = storm_bytes(v)
            try:
                out[f.decode()] = int(raw.decode("ascii"))
            except (UnicodeDecodeError, ValueError):
                msg = (
                    f"Redis key {(name + b'$txid').decode('utf-8', 'replace')!r} at {self.describe()}: field {f!r} "
                    f"holds {v[:40]!r}, not a txid as Storm's RedisKeyValueState writes it; is this Storm's state?"
                )
                raise StateError(msg) from None
        return out

    def task_namespaces(self) -> list[tuple[str, int]]:
        """Every ``(component, task)`` with a ``$txid`` hash (weir's own ``{…}`` cluster keys excluded)."""
        found: set[tuple[str, int]] = set()
        for key in self._scan(b"*$txid"):
            name = key[:-5].decode("utf-8", "replace")
            comp, _, task = name.rpartition("-")
            if not comp or not task.isdigit() or name.startswith(("$checkpointspout-", "{")):
                continue
            if b"epoch" in self.client.hkeys(key):  # weir's own txid record
                continue
            found.add((comp, int(task)))
        return sorted(found)

    def checkpoint_states(self) -> dict[int, tuple[str, int]]:
        """The checkpoint spout's ``CheckPointState`` per task: ``(phase, txid)``."""
        out: dict[int, tuple[str, int]] = {}
        for key in self._scan(b"$checkpointspout-*"):
            name = key.decode("utf-8", "replace")
            if name.endswith(("$txid", "$prepare")) or not name.rpartition("-")[2].isdigit():
                continue
            for skey, sval in self.client.hgetall(key).items():
                kbytes, _ = storm_bytes(skey)
                vbytes, _ = storm_bytes(sval)
                try:
                    if decode_object(kbytes) != "__state":
                        continue
                    out[int(name.rpartition("-")[2])] = _checkpoint_state(vbytes)
                except KryoUnsupported as exc:
                    msg = f"{name} at {self.describe()}: Storm's checkpoint record cannot be read ({exc})"
                    raise StateError(msg) from exc
        return out

    def read(self, component: str, task: int) -> StormNamespace:
        """One task namespace: txids, committed rows and the prepared change set (Kryo bytes)."""
        name = f"{component}-{task}".encode()
        txids = self._txids(name)
        rows: dict[bytes, bytes] = {}
        b64 = False
        for k, v in self.client.hgetall(name).items():
            kb, k64 = storm_bytes(k)
            vb, v64 = storm_bytes(v)
            b64 = b64 or k64 or v64
            rows[kb] = vb
        pending: dict[bytes, bytes] = {}
        for k, v in self.client.hgetall(name + b"$prepare").items():
            kb, _ = storm_bytes(k)
            pending[kb] = storm_bytes(v)[0]
        return StormNamespace(component, task, txids.get("commit"), txids.get("prepare"), rows, pending, b64)


def _checkpoint_state(data: bytes) -> tuple[str, int]:
    """``(phase, txid)`` of Storm's ``CheckPointState`` (Kryo's field serializer: state, txid)."""
    # decode_state_value refuses a class written field by field; this one's two fields are known
    raw = _optional_bytes(data)
    name = b"org.apache.storm.spout.CheckPointState"
    head = b"\x01\x00" + name[:-1] + bytes([name[-1] | 0x80])
    if not raw.startswith(head):
        msg = f"expected a CheckPointState, found {raw[:48]!r}"
        raise KryoUnsupported(msg)
    rest = raw[len(head) :]
    ordinal = rest[0] - 1
    if not 0 <= ordinal < len(_PHASES):
        msg = f"a CheckPointState phase ordinal {ordinal}"
        raise KryoUnsupported(msg)
    value = 0
    for i, b in enumerate(rest[1:10]):
        value |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            break
    return _PHASES[ordinal], (value >> 1) ^ -(value & 1)


def _optional_bytes(data: bytes) -> bytes:
    # 0x0b Optional, 0x01 0x00 "[B" (by name), varint length + 1, the bytes
    if not data.startswith(b"\x0b\x01\x00[\xc2"):
        msg = f"expected Optional<byte[]>, found {data[:16]!r}"
        raise KryoUnsupported(msg)
    n, shift, pos = 0, 0, 5
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    return data[pos : pos + n - 1]


def _to_weir(value: Any) -> Any:
    """A decoded Java value as weir stores it: sets become sorted lists (JSON has no sets)."""
    if isinstance(value, (set, frozenset)):
        items = [_to_weir(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return sorted(items, key=repr)
    if isinstance(value, list):
        return [_to_weir(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_weir(v) for k, v in value.items()}
    return value


def _digest(rows: Iterable[tuple[bytes, bytes]]) -> str:
    h = hashlib.sha256()
    for k, v in sorted(rows):
        h.update(len(k).to_bytes(4, "big") + k + len(v).to_bytes(4, "big") + v)
    return h.hexdigest()[:16]


def _mapping(items: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        src, sep, dst = item.partition("=")
        if not sep or not src or not dst:
            msg = f"{what} {item!r}: expected STORM_ID=WEIR_ID (e.g. count=count)"
            raise ConfigError(msg)
        out[src] = dst
    return out


def _plan(
    source: StormRedis,
    components: dict[str, str],
    parallelism: dict[str, int],
    key_ser: Any,
    val_ser: Any,
    *,
    skip: bool,
) -> tuple[_Plan, list[StormNamespace]]:
    from weir._util import stable_hash

    spouts = source.checkpoint_states()
    plan = _Plan()
    read: list[StormNamespace] = []
    bad: list[str] = []
    found = source.task_namespaces()
    for storm_id, weir_id in components.items():
        tasks = [t for c, t in found if c == storm_id]
        if not tasks:
            have = ", ".join(sorted({c for c, _ in found})) or "none"
            msg = (
                f"no Storm state of component {storm_id!r} in {source.describe()} (no {storm_id}-<task>$txid key); "
                f"the Storm components with state there: {have}"
            )
            raise StateError(msg)
        n = parallelism.get(weir_id, len(tasks))
        out: list[dict[bytes, bytes]] = [{} for _ in range(n)]
        plan.tasks[weir_id] = out
        total = 0
        for task in tasks:
            ns = source.read(storm_id, task)
            read.append(ns)
            print(
                f"read Storm namespace {ns.name}: {len(ns.rows):,} rows, {len(ns.pending):,} prepared",
                file=sys.stderr,
                flush=True,
            )
            rows = dict(ns.rows)
            if ns.pending:
                committing = any(ph == "COMMITTING" and tx == ns.prepared for ph, tx in spouts.values())
                if committing:  # Storm's recovery would commit it: roll it forward
                    for k, v in ns.pending.items():
                        try:
                            present, _ = decode_state_value(v)
                        except KryoUnsupported:
                            present = True  # decoded (and named) below
                        if present:
                            rows[k] = v
                        else:
                            rows.pop(k, None)
                    plan.rolled_forward.append(ns.name)
                else:
                    plan.dropped_prepared.append(ns.name)
            for skey, sval in rows.items():
                try:
                    key = decode_object(skey)
                    present, value = decode_state_value(sval)
                    if not present:
                        continue
                    value = _to_weir(value)
                    wkey = key_ser.serialize(_to_weir(key))
                    wval = val_ser.serialize(value)
                    t = stable_hash(key) % n
                except (KryoUnsupported, TypeError, ValueError) as exc:
                    where = f"Storm namespace {ns.name!r}, stored key {skey[:60]!r}"
                    try:
                        where = f"Storm namespace {ns.name!r}, key {decode_object(skey)!r}"
                    except (KryoUnsupported, TypeError, ValueError):
                        pass
                    bad.append(f"{where}: {exc}")
                    continue
                out[t][wkey] = wval
                total += 1
        plan.source_keys[weir_id] = total
    if bad and not skip:
        shown = "\n  ".join(bad[:10]) + (f"\n  ... and {len(bad) - 10} more" if len(bad) > 10 else "")
        msg = (
            f"{len(bad)} Storm row(s) cannot be decoded, so nothing was written:\n  {shown}\n"
            "weir reads what Storm's DefaultStateSerializer writes for String, Long, Integer, Double, Float, Boolean, "
            "byte[] and the java.util collections; import the rest with --skip-unsupported (those rows are left out "
            "and listed) or convert them in Storm first"
        )
        raise StateError(msg)
    plan.skipped = bad
    return plan, read


def _cmd_import(args: argparse.Namespace, open_store: Any) -> int:
    from weir.checkpoint.coordinator import CheckpointPhase, CheckpointStore
    from weir.checkpoint.rescale import task_namespace

    topo = args.topology
    parallelism = {k: int(v) for k, v in _mapping(args.parallelism or [], "--parallelism").items()}
    for comp, n in parallelism.items():
        if n < 1:
            msg = f"--parallelism {comp}={n}: a parallelism is at least 1"
            raise ConfigError(msg)
    components = _mapping(args.component or [], "--component")
    twice = sorted({w for w in components.values() if list(components.values()).count(w) > 1})
    if twice:
        msg = (
            f"--component maps several Storm components onto weir component(s) {', '.join(twice)}; each weir "
            "component takes the state of one Storm component"
        )
        raise ConfigError(msg)
    unknown = sorted(set(parallelism) - set(components.values())) if components else []
    if unknown:
        msg = f"--parallelism names {', '.join(unknown)}, which no --component maps a Storm component to"
        raise ConfigError(msg)
    source = StormRedis(args.source)
    try:
        if not components:
            components = {c: c for c in sorted({c for c, _ in source.task_namespaces()})}
            if not components:
                msg = f"no Storm key-value state in {source.describe()} (no <component>-<task>$txid key)"
                raise StateError(msg)
        with open_store(args, must_exist=False) as store:
            backend = store.backend
            cstore = CheckpointStore(backend, topo)
            rec = cstore.load()
            marker = backend.get(cstore.namespace, IMPORT_KEY)
            if rec is not None and marker is None:
                msg = (
                    f"weir topology {topo!r} already has state in {backend.describe()} (its coordinator record "
                    f"{cstore.namespace!r}); the import writes only into a topology that has none. Import under "
                    "another --topology name, or remove that topology's state yourself first"
                )
                raise StateError(msg)
            if rec is not None and rec.phase is CheckpointPhase.COMMITTED and rec.txid >= IMPORT_TXID:
                print(f"weir topology {topo!r}: the import recorded in {cstore.namespace!r} is complete; nothing to do")
                return 0
            plan, read = _plan(
                source,
                components,
                parallelism,
                store.key_serializer,
                store.value_serializer,
                skip=args.skip_unsupported,
            )
            _print_source(read)
            rows_out = []
            for comp, tasks in plan.tasks.items():
                for t, rows in enumerate(tasks):
                    rows_out.append([comp, t, task_namespace(topo, comp, t), len(rows), _digest(rows.items())])
            print_table(["weir component", "task", "namespace", "keys", "sha256"], rows_out)
            for ns in plan.rolled_forward:
                print(f"{ns}: a prepared change set Storm's checkpoint spout was COMMITTING: rolled forward")
            for ns in plan.dropped_prepared:
                print(f"{ns}: a prepared change set Storm had not committed: left out (Storm rolls it back)")
            for line in plan.skipped:
                print(f"skipped (--skip-unsupported): {line}")
            if args.dry_run:
                print("dry run: nothing was written")
                return 0
            if rec is None:
                for comp, tasks in plan.tasks.items():
                    for t in range(len(tasks)):
                        ns = task_namespace(topo, comp, t)
                        if backend.txids(ns).committed is not None or backend.count(ns):
                            msg = (
                                f"weir namespace {ns!r} in {backend.describe()} already holds state that this import "
                                "did not write; choose another --topology name, or remove it yourself first"
                            )
                            raise StateError(msg)
            _write(cstore, plan, source.describe(), topo)
            _verify(backend, plan, topo)
            print(
                f"imported {sum(plan.source_keys.values())} keys of {len(read)} Storm task namespace(s) into weir "
                f"topology {topo!r} (committed txid {IMPORT_TXID}); submit it with the same component ids and "
                "parallelism to go on from there",
                file=sys.stderr,
            )
    finally:
        source.close()
    return 0


def _print_source(read: list[StormNamespace]) -> None:
    rows = [
        [ns.name, ns.committed, ns.prepared, len(ns.rows), len(ns.pending), "base64" if ns.base64 else "binary"]
        for ns in sorted(read, key=lambda n: (n.component, n.task))
    ]
    print_table(["storm namespace", "committed txid", "prepared txid", "keys", "prepared", "form"], rows)


def _write(cstore: Any, plan: _Plan, source_where: str, topo: str) -> None:
    from weir._faults import crash_point
    from weir.checkpoint.coordinator import CheckpointPhase, CheckPointState
    from weir.checkpoint.rescale import task_namespace

    backend = cstore.backend
    epoch = cstore.acquire_epoch()  # fences any driver or earlier import run of this topology
    par = {comp: len(tasks) for comp, tasks in plan.tasks.items()}
    marker = json.dumps({"from": source_where, "components": sorted(plan.tasks)}, sort_keys=True).encode()
    names = [(task_namespace(topo, c, t), rows) for c, tasks in plan.tasks.items() for t, rows in enumerate(tasks)]
    rec = cstore.load()
    if rec is not None and rec.phase is CheckpointPhase.COMMITTING:
        for ns, _ in names:  # a killed run's commit: roll it forward
            if backend.txids(ns).prepared == IMPORT_TXID:
                backend.commit_prepared(ns, IMPORT_TXID, epoch)
        cstore.save(replace(rec, phase=CheckpointPhase.COMMITTED), epoch, {IMPORT_KEY: marker})
        return
    # 1. the record says PREPARING: nothing is visible until COMMITTING
    rec = CheckPointState(txid=IMPORT_TXID, phase=CheckpointPhase.PREPARING, parallelism=par)
    cstore.save(rec, epoch, {IMPORT_KEY: marker})
    # 2. every task's rows as the prepared change set of the import txid
    for i, (ns, rows) in enumerate(names):
        backend.write_prepared(ns, IMPORT_TXID, dict(rows), epoch)
        if i == 0:
            crash_point("import_storm_prepared", IMPORT_TXID)
    # 3. the commit point
    rec = replace(rec, phase=CheckpointPhase.COMMITTING)
    cstore.save(rec, epoch, {IMPORT_KEY: marker})
    for i, (ns, _) in enumerate(names):
        backend.commit_prepared(ns, IMPORT_TXID, epoch)
        if i == 0:
            crash_point("import_storm_committing", IMPORT_TXID)
    # 4. done
    cstore.save(replace(rec, phase=CheckpointPhase.COMMITTED), epoch, {IMPORT_KEY: marker})


def _verify(backend: Any, plan: _Plan, topo: str) -> None:
    from weir.checkpoint.rescale import task_namespace

    for comp, tasks in plan.tasks.items():
        for t, rows in enumerate(tasks):
            ns = task_namespace(topo, comp, t)
            got = list(backend.scan(ns))
            if len(got) != len(rows) or _digest(got) != _digest(rows.items()):
                msg = (
                    f"weir namespace {ns!r} in {backend.describe()}: after the import it holds {len(got)} keys "
                    f"(sha256 {_digest(got)}), expected {len(rows)} (sha256 {_digest(rows.items())}); something "
                    "else wrote to it meanwhile. Inspect it with `weir state dump`"
                )
                raise StateError(msg)
    print("verified: every weir namespace holds exactly the keys and values routed to it")


def register(sub: Any, common: argparse.ArgumentParser, open_store: Any) -> None:
    """Add ``weir state import-storm``; ``common``: the target store's options (``--to`` is its URL)."""
    p = sub.add_parser(
        "import-storm",
        parents=[common],
        help="import the key-value state Apache Storm wrote (storm-redis) into a weir topology",
        description=(
            "Read the committed state of Apache Storm's stateful bolts from the Redis or Redis Cluster its "
            "RedisKeyValueStateProvider wrote (namespaces <component>-<task id>, Kryo or Base64 form), re-partition "
            "the keys over the weir topology's tasks by the fields grouping's hash, and write them as its committed "
            "state under txid 1 (fenced, crash-safe); then verify key counts and checksums. Storm's keys are only "
            "read. Nothing is written when a value cannot be decoded, unless --skip-unsupported."
        ),
    )
    p.add_argument(
        "--from", dest="source", required=True, metavar="URL", help="Storm's Redis: redis://… or redis+cluster://…"
    )
    p.add_argument(
        "--topology", required=True, metavar="T", help="the weir topology to import into (must have no state)"
    )
    p.add_argument(
        "--component",
        action="append",
        metavar="STORM_ID=WEIR_ID",
        help="a Storm stateful bolt and the weir component it becomes (repeatable; default: every one, same id)",
    )
    p.add_argument(
        "--parallelism",
        action="append",
        metavar="WEIR_ID=N",
        help="the weir component's task count (default: Storm's task count of the component)",
    )
    p.add_argument("--to", dest="url", metavar="URL", help="the weir store to write (same as --url)")
    p.add_argument("--dry-run", action="store_true", help="read, decode and print the plan; write nothing")
    p.add_argument("--skip-unsupported", action="store_true", help="leave out (and list) rows that cannot be decoded")
    p.set_defaults(func=lambda args: _cmd_import(args, open_store))
