"""Connections to HBase through its Thrift gateway: settings, table checks, retries, error text.

:class:`HBaseSettings` is parsed once from ``topology.state.provider.config`` — Storm's
``hbaseConfigKey`` / ``tableName`` / ``columnFamily`` or an ``hbase://HOST:PORT/TABLE?family=CF`` url —
and is what travels to executors. :class:`HBaseClient` wraps one happybase connection (HBase's
Thrift 1 gateway, ``org.apache.hadoop.hbase.thrift.ThriftServer``) per process and thread, retries a
call after the gateway or the region server went away (idempotent calls only; compare-and-set calls
are re-checked by their callers), and turns failures into errors that name the store.

Retriable or permanent: a gateway or region server that does not answer (refused, reset, a socket
timeout, a region moving) is retried for :meth:`HBaseClient.retry_for_s` (twice the timeout, at
most 120 s) and then raises :class:`~weir.errors.StoreUnavailableError` naming the gateway, the call
and how long it waited — supervision retries it; while it waits the watchdog logs "still waiting".
A missing table or column family, or an argument HBase refuses, is a permanent
:class:`~weir.errors.StateError`, never retried.

Used by the ``hbase`` state provider and by Trident's ``HBaseMapState``.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

from weir.errors import ConfigError, StateError, StoreUnavailableError
from weir.state.connections import ProcessConnections
from weir.state.watchdog import WATCHDOG

__all__ = [
    "DEFAULT_BUCKETS",
    "DEFAULT_THRIFT_PORT",
    "LAYOUTS",
    "HBaseClient",
    "HBaseSettings",
    "hbase_settings_from_storm",
    "layout_options",
    "thrift_types",
]

DEFAULT_THRIFT_PORT = 9090
"""HBase's default Thrift gateway port (``hbase.regionserver.thrift.port``)."""

DEFAULT_BUCKETS = 256
"""Bucket rows of a namespace in the ``buckets`` layout unless ``buckets`` says otherwise.

A 10k-key commit then writes at most 256 rows (about 40 cells each), and a namespace of a million
keys has about 4,000 cells (a few hundred KB) per row: far below what HBase handles in one row.
"""

MAX_BUCKETS = 65_536
LAYOUTS = ("buckets", "rows")
"""``buckets``: several keys per row (the key is the column); ``rows``: a row per key (Storm's layout)."""

_DEFAULT_TIMEOUT_MS = 60_000
#: how long a call keeps retrying while the gateway or HBase restarts, at most (twice the timeout below it)
_RETRY_FOR_S = 120.0
#: HBase IOErrors that retrying cannot help (the table or family is missing or disabled, a bad argument)
_PERMANENT_IO = (
    "TableNotFoundException",
    "NoSuchColumnFamilyException",
    "TableNotEnabledException",
    "TableNotDisabledException",
    "DoNotRetryIOException",
    "AccessDeniedException",
    "IllegalArgumentException",
)
T = TypeVar("T")


def thrift_types() -> Any:
    """The Thrift 1 module of happybase (``Mutation``, ``BatchMutation``, ``TScan``, ``IOError``)."""
    try:
        import happybase  # noqa: F401 - loads the Hbase_thrift module
        import Hbase_thrift
    except ImportError as exc:  # pragma: no cover - the hbase extra is missing
        msg = "the hbase provider needs happybase: pip install 'weir[hbase]'"
        raise ConfigError(msg) from exc
    return Hbase_thrift


@dataclass(frozen=True)
class HBaseSettings:
    """Where the Thrift gateway is and which table / column family hold the state (picklable).

    Attributes
    ----------
    host, port:
        The Thrift gateway (default ``localhost:9090``).
    table:
        The pre-created table (Storm's ``tableName``).
    family:
        The pre-created column family (Storm's ``columnFamily``).
    timeout_ms:
        Socket timeout of one call, in milliseconds (default 60000). A call whose gateway does not
        answer is retried for twice this (at most 120 s), then fails as unavailable.
    framed, compact:
        The gateway runs with framed transport (``hbase thrift start -f``, or
        ``hbase.regionserver.thrift.framed``; needed by its ``-nonblocking`` and ``-hsha`` servers)
        / the compact protocol (``-c``, ``hbase.regionserver.thrift.compact``). Both default to
        the gateway's defaults (buffered, binary), which are also the fastest here: the compact
        protocol is encoded in pure Python by the client.
    layout:
        How the ``hbase`` state provider lays out a namespace's committed keys: ``"buckets"``
        (several keys per row, the key as the column), ``"rows"`` (a row per key, as Storm's
        ``HBaseKeyValueState``), or None (the default: a namespace keeps the layout recorded when
        it was first written; a new one gets ``buckets``). An explicit layout that differs from a
        namespace's recorded one is an error naming both.
    buckets:
        Bucket rows of a *new* namespace in the ``buckets`` layout (1 to 65536; default
        :data:`DEFAULT_BUCKETS`). The count is recorded with the namespace, which keeps it.
    """

    host: str = "localhost"
    port: int = DEFAULT_THRIFT_PORT
    table: str = "state"
    family: str = "cf"
    timeout_ms: int = _DEFAULT_TIMEOUT_MS
    framed: bool = False
    compact: bool = False
    layout: str | None = None
    buckets: int | None = None

    def __post_init__(self) -> None:
        if not self.host or not 0 < self.port < 65536:
            msg = f"hbase provider: bad Thrift gateway address {self.host}:{self.port}"
            raise ConfigError(msg)
        if not self.table or ":" in self.family or not self.family:
            msg = f"hbase provider: bad table {self.table!r} / column family {self.family!r}"
            raise ConfigError(msg)
        if self.timeout_ms <= 0:
            msg = f"hbase provider: timeout must be a positive number of milliseconds, got {self.timeout_ms}"
            raise ConfigError(msg)
        if self.layout is not None and self.layout not in LAYOUTS:
            msg = f"hbase provider: layout must be buckets or rows, got {self.layout!r}"
            raise ConfigError(msg)
        if self.buckets is not None:
            if isinstance(self.buckets, bool) or not isinstance(self.buckets, int):
                msg = f"hbase provider: buckets must be an integer, got {self.buckets!r}"
                raise ConfigError(msg)
            if not 0 < self.buckets <= MAX_BUCKETS:
                msg = f"hbase provider: buckets must be between 1 and {MAX_BUCKETS}, got {self.buckets}"
                raise ConfigError(msg)
            if self.layout == "rows":
                msg = "hbase provider: buckets is an option of layout=buckets, not of layout=rows"
                raise ConfigError(msg)

    @classmethod
    def from_url(cls, url: str) -> HBaseSettings:
        """Parse ``hbase://HOST[:PORT]/TABLE[?family=CF&timeout=MS&transport=framed&protocol=compact]``.

        Also ``layout=buckets|rows`` and ``buckets=N`` (see the class). Defaults: table ``state``,
        family ``cf``, the gateway's buffered transport and binary protocol, each namespace's
        recorded layout (``buckets`` for a new one).
        """
        parts = urlsplit(url)
        if parts.scheme.lower() != "hbase":
            msg = f"not an hbase:// url: {url!r}"
            raise ConfigError(msg)
        try:
            port = parts.port or DEFAULT_THRIFT_PORT
        except ValueError as exc:
            msg = f"hbase url {url!r}: bad port"
            raise ConfigError(msg) from exc
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        unknown = set(query) - {"family", "timeout", "transport", "protocol", "layout", "buckets"}
        if unknown:
            msg = (
                f"hbase url {url!r}: unknown parameter(s) {', '.join(sorted(unknown))}; "
                "use family, timeout, transport, protocol, layout, buckets"
            )
            raise ConfigError(msg)
        transport = query.get("transport", "buffered")
        protocol = query.get("protocol", "binary")
        if transport not in ("buffered", "framed") or protocol not in ("binary", "compact"):
            msg = f"hbase url {url!r}: transport must be buffered or framed, protocol binary or compact"
            raise ConfigError(msg)
        table = unquote(parts.path.strip("/")) or "state"
        try:
            timeout = int(query.get("timeout", _DEFAULT_TIMEOUT_MS))
        except ValueError as exc:
            msg = f"hbase url {url!r}: timeout must be milliseconds"
            raise ConfigError(msg) from exc
        buckets = query.get("buckets")
        try:
            n_buckets = None if buckets is None else int(buckets)
        except ValueError as exc:
            msg = f"hbase url {url!r}: buckets must be an integer, got {buckets!r}"
            raise ConfigError(msg) from exc
        return cls(
            parts.hostname or "localhost",
            port,
            table,
            query.get("family", "cf"),
            timeout,
            framed=transport == "framed",
            compact=protocol == "compact",
            layout=query.get("layout"),
            buckets=n_buckets,
        )

    @property
    def url(self) -> str:
        """The ``hbase://`` url of these settings."""
        url = f"hbase://{self.host}:{self.port}/{self.table}?family={self.family}&timeout={self.timeout_ms}"
        if self.framed:
            url += "&transport=framed"
        if self.compact:
            url += "&protocol=compact"
        if self.layout is not None:
            url += f"&layout={self.layout}"
        if self.buckets is not None:
            url += f"&buckets={self.buckets}"
        return url

    def describe(self) -> str:
        """``hbase://host:port/table (family cf)``, for messages."""
        return f"hbase://{self.host}:{self.port}/{self.table} (column family {self.family!r})"

    @property
    def create_command(self) -> str:
        """The HBase shell command that creates the table."""
        return f"create '{self.table}', '{self.family}'"


def hbase_settings_from_storm(options: Mapping[str, Any], conf: Mapping[str, Any], where: str) -> HBaseSettings:
    """Settings from Storm's provider config: ``hbaseConfigKey`` names a map in the topology config.

    That map is HBase's own configuration (``hbase.rootdir``, ``hbase.zookeeper.quorum``, ...); the
    Thrift gateway is found by HBase's keys ``hbase.regionserver.thrift.ipaddress`` /
    ``hbase.thrift.host`` (default ``localhost``) and ``hbase.regionserver.thrift.port`` (default
    9090), with ``hbase.regionserver.thrift.framed`` / ``hbase.regionserver.thrift.compact`` (default
    false) for its transport and protocol. Other HBase keys are accepted and not used (the gateway
    knows the cluster). weir's own keys ``layout`` (``buckets`` / ``rows``) and ``buckets`` sit
    beside ``tableName`` (see :class:`HBaseSettings`).
    """
    hb: Mapping[str, Any] = {}
    key = options.get("hbaseConfigKey")
    if key is not None:
        if not isinstance(key, str):
            msg = f"{where}.hbaseConfigKey must be a string, got {type(key).__name__}"
            raise ConfigError(msg)
        found = conf.get(key)
        if found is None:
            msg = f"{where}.hbaseConfigKey is {key!r}, but the topology configuration has no {key!r} map"
            raise ConfigError(msg)
        if not isinstance(found, Mapping):
            msg = f"topology configuration key {key!r} (hbaseConfigKey) must be a map, got {type(found).__name__}"
            raise ConfigError(msg)
        hb = found
    for name in ("tableName", "columnFamily"):
        if name not in options:
            msg = (
                f"{where}: the HBase provider needs {name} (a pre-created table and column family, "
                "e.g. in the hbase shell: create 'state', 'cf')"
            )
            raise ConfigError(msg)
        if not isinstance(options[name], str):
            msg = f"{where}.{name} must be a string, got {type(options[name]).__name__}"
            raise ConfigError(msg)
    host = hb.get("hbase.thrift.host") or hb.get("hbase.regionserver.thrift.ipaddress") or "localhost"
    if host in ("0.0.0.0", "::"):  # noqa: S104 - a bind-all address; the client connects locally
        host = "localhost"
    try:
        port = int(hb.get("hbase.regionserver.thrift.port", DEFAULT_THRIFT_PORT))
        timeout = int(hb.get("hbase.client.operation.timeout", _DEFAULT_TIMEOUT_MS))
    except (TypeError, ValueError) as exc:
        msg = f"hbase configuration {key!r}: hbase.regionserver.thrift.port / timeout must be integers"
        raise ConfigError(msg) from exc
    framed, compact = (
        _flag(hb, k, key) for k in ("hbase.regionserver.thrift.framed", "hbase.regionserver.thrift.compact")
    )
    layout, buckets = layout_options(options, where)
    return HBaseSettings(
        str(host),
        port,
        options["tableName"],
        options["columnFamily"],
        timeout,
        framed=framed,
        compact=compact,
        layout=layout,
        buckets=buckets,
    )


def layout_options(options: Mapping[str, Any], where: str) -> tuple[str | None, int | None]:
    """The ``layout`` and ``buckets`` keys of a provider config (each None when absent), type-checked."""
    layout = options.get("layout")
    if layout is not None and (not isinstance(layout, str) or layout not in LAYOUTS):
        msg = f"{where}.layout must be 'buckets' or 'rows', got {layout!r}"
        raise ConfigError(msg)
    buckets = options.get("buckets")
    if buckets is not None and (isinstance(buckets, bool) or not isinstance(buckets, int)):
        msg = f"{where}.buckets must be an integer (bucket rows per namespace), got {buckets!r}"
        raise ConfigError(msg)
    return layout, buckets


def _flag(hb: Mapping[str, Any], name: str, key: Any) -> bool:
    value = hb.get(name, False)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    msg = f"hbase configuration {key!r}: {name} must be true or false, got {value!r}"
    raise ConfigError(msg)


def _close_quietly(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001, S110 - a broken connection may fail to close; it is dropped anyway
        pass


def _io_text(exc: BaseException) -> str:
    """The text of HBase's Thrift ``IOError`` (its ``message`` is bytes or str)."""
    message = getattr(exc, "message", None)
    if isinstance(message, bytes):
        return message.decode("utf-8", "replace")
    return str(message) if message else type(exc).__name__


def _transport_errors() -> tuple[type[BaseException], ...]:
    from thriftpy2.transport import TTransportException

    return (TTransportException, OSError, socket.timeout, EOFError, BrokenPipeError)


class HBaseClient:
    """Thrift 1 calls on one happybase connection per process and thread, with retries.

    Parameters
    ----------
    settings:
        Where the gateway is.
    """

    def __init__(self, settings: HBaseSettings) -> None:
        self.settings = settings
        self.table = settings.table.encode()
        self.family = settings.family.encode()
        self.types = thrift_types()
        self._transport = _transport_errors()
        self._conns: ProcessConnections[Any] = ProcessConnections(
            self._connect, lambda c: c.close(), usable=lambda c: c.transport.is_open()
        )
        self._pool_lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._executor_pid = 0

    def _connect(self) -> Any:
        import happybase

        s = self.settings
        conn = happybase.Connection(
            s.host,
            s.port,
            timeout=s.timeout_ms,
            autoconnect=False,
            transport="framed" if s.framed else "buffered",
            protocol="compact" if s.compact else "binary",
        )
        conn.open()
        return conn

    def close(self) -> None:
        """Close this process's connections (and its writer threads)."""
        with self._pool_lock:
            executor, self._executor = self._executor, None
        if executor is not None and self._executor_pid == os.getpid():
            executor.shutdown(wait=True)
        self._conns.close()

    @property
    def retry_for_s(self) -> float:
        """How long a call keeps retrying a gateway that does not answer: twice the timeout, 1 to 120 s."""
        return min(_RETRY_FOR_S, max(1.0, 2 * self.settings.timeout_ms / 1000.0))

    @property
    def bound_s(self) -> float:
        """The longest one call can wait: the retries, then a last attempt's connect and reply, and back-off."""
        return self.retry_for_s + 2 * self.settings.timeout_ms / 1000.0 + 1.0

    def unavailable(self, method: str, exc: BaseException, waited: float) -> StoreUnavailableError:
        """The retriable error of a call whose gateway or region server did not answer."""
        reason = _io_text(exc)[:500] if isinstance(exc, self.types.IOError) else f"{type(exc).__name__}: {exc}"
        return StoreUnavailableError(
            f"HBase at {self.settings.describe()} did not answer {method} after {waited:.1f} s "
            f"(timeout={self.settings.timeout_ms} ms per attempt, retried for {self.retry_for_s:g} s; {reason}); "
            "the batch fails and is retried or recovered once HBase and its Thrift gateway answer"
        )

    def call(self, method: str, *args: Any, retry: bool = True) -> Any:
        """``client.<method>(*args)``, reconnecting and retrying while HBase is away (``retry``).

        Raises
        ------
        StoreUnavailableError
            When the gateway or HBase did not answer (after :attr:`retry_for_s` with ``retry``).
        StateError
            When HBase refused the call for good (a missing table or family, a bad argument).
        """
        started = time.monotonic()
        deadline = started + self.retry_for_s
        delay = 0.05
        label = f"HBase {method} at {self.settings.describe()} (gives up after about {self.bound_s:.0f} s)"
        with WATCHDOG.waiting(label, self.bound_s if retry else 2 * self.settings.timeout_ms / 1000.0):
            while True:
                conn = None
                try:
                    conn = self._conns.get()
                    return getattr(conn.client, method)(*args)
                except self._transport as exc:
                    # only this thread's connection (the gateway drops idle ones after a minute): the
                    # other threads' connections may be mid-call
                    if conn is not None:
                        _close_quietly(conn)
                    if not retry or time.monotonic() > deadline:
                        raise self.unavailable(method, exc, time.monotonic() - started) from exc
                except self.types.IOError as exc:
                    text = _io_text(exc)
                    if any(p in text for p in _PERMANENT_IO):
                        msg = (
                            f"HBase at {self.settings.describe()} refused {method}: {text[:500]}; this is not "
                            f"retried: check the table and column family ({self.settings.create_command})"
                        )
                        raise StateError(msg) from exc
                    # region moving / server starting: HBase's own retries gave up; try again a while
                    if not retry or time.monotonic() > deadline:
                        raise self.unavailable(method, exc, time.monotonic() - started) from exc
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def check_table(self) -> None:
        """Connect now and check that the table and the column family exist.

        Raises
        ------
        ConfigError
            When the gateway is unreachable, or the table or family is missing (naming the HBase
            shell command that creates it).
        """
        s = self.settings
        try:
            tables = self.call("getTableNames", retry=False)
        except StateError as exc:
            msg = (
                f"hbase provider: cannot reach the HBase Thrift gateway at {s.host}:{s.port} ({exc.__cause__}); "
                "start it with `hbase thrift start` (or set hbase.regionserver.thrift.port); a gateway started "
                "with -f / -c needs transport=framed / protocol=compact in the url (or "
                "hbase.regionserver.thrift.framed / .compact in the hbaseConfigKey map)"
            )
            raise ConfigError(msg) from exc
        if self.table not in tables:
            msg = (
                f"hbase provider: table {s.table!r} does not exist at {s.host}:{s.port}; weir does not create "
                f"it: create it in the hbase shell with: {s.create_command}"
            )
            raise ConfigError(msg)
        families = self.call("getColumnDescriptors", self.table)
        names = {bytes(k).rstrip(b":") for k in families}
        if self.family not in names:
            have = ", ".join(sorted(n.decode(errors="replace") for n in names))
            msg = (
                f"hbase provider: table {s.table!r} has no column family {s.family!r} (it has: {have}); "
                f"add it in the hbase shell with: alter '{s.table}', '{s.family}' "
                f"(or create a table for weir: {s.create_command})"
            )
            raise ConfigError(msg)

    # ---- small helpers on the configured table -------------------------------------------------
    def column(self, qualifier: bytes) -> bytes:
        """``family:qualifier``."""
        return self.family + b":" + qualifier

    def get_rows(self, rows: list[bytes], columns: list[bytes]) -> dict[bytes, dict[bytes, bytes]]:
        """``{row: {column: value}}`` of the rows that exist (one multi-get)."""
        if not rows:
            return {}
        got = self.call("getRowsWithColumns", self.table, rows, columns, {})
        return {r.row: {c: cell.value for c, cell in r.columns.items()} for r in got}

    def mutate_rows(self, batch: list[tuple[bytes, list[Any]]], ts: int | None = None) -> None:
        """Apply ``[(row, [Mutation, ...])]`` (idempotent; at timestamp ``ts`` when given)."""
        if not batch:
            return
        bm = [self.types.BatchMutation(row=r, mutations=m) for r, m in batch]
        if ts is None:
            self.call("mutateRows", self.table, bm, {})
        else:
            self.call("mutateRowsTs", self.table, bm, ts, {})

    def mutate_rows_parallel(
        self, batch: list[tuple[bytes, list[Any]]], ts: int | None = None, *, chunk: int, threads: int
    ) -> None:
        """:meth:`mutate_rows` of ``batch`` in chunks of about ``chunk`` cells, ``threads`` calls at a time.

        A chunk holds whole rows, up to ``chunk`` mutations (a row of more goes alone). Each thread
        uses its own gateway connection, so the gateway's workers and the region server's handlers
        work on several chunks at once, while this process encodes the next one. Only for
        idempotent batches (rows written at a fixed ``ts``): a failed chunk raises after the others
        ended, and the whole batch is then retried or recovered by the caller.
        """
        parts: list[list[tuple[bytes, list[Any]]]] = []
        part: list[tuple[bytes, list[Any]]] = []
        cells = 0
        for row in batch:
            if part and cells + len(row[1]) > chunk:
                parts.append(part)
                part, cells = [], 0
            part.append(row)
            cells += len(row[1])
        if part:
            parts.append(part)
        if len(parts) <= 1 or threads <= 1:
            for part in parts:
                self.mutate_rows(part, ts)
            return
        pool = self._pool(threads)
        futures = [pool.submit(self.mutate_rows, part, ts) for part in parts]
        errors = [f.exception() for f in futures]
        for exc in errors:
            if exc is not None:
                raise exc

    def get_rows_many(
        self, requests: list[tuple[list[bytes], list[bytes]]], *, threads: int
    ) -> dict[bytes, dict[bytes, bytes]]:
        """:meth:`get_rows` of each ``(rows, columns)`` request, ``threads`` calls at a time, merged.

        Each request asks for its own columns (one Thrift multi-get restricts every row to the same
        columns); a row belongs to one request only.
        """
        out: dict[bytes, dict[bytes, bytes]] = {}
        if len(requests) <= 1 or threads <= 1:
            for rows, columns in requests:
                out.update(self.get_rows(rows, columns))
            return out
        pool = self._pool(threads)
        futures = [pool.submit(self.get_rows, rows, columns) for rows, columns in requests]
        for f in futures:
            out.update(f.result())
        return out

    def _pool(self, threads: int) -> ThreadPoolExecutor:
        pid = os.getpid()
        with self._pool_lock:
            if self._executor is None or self._executor_pid != pid:
                # a pool inherited through fork() has no threads in this process: make a new one
                self._executor = ThreadPoolExecutor(threads, thread_name_prefix="weir-hbase")
                self._executor_pid = pid
            return self._executor

    def put(self, column: bytes, value: bytes) -> Any:
        """A put ``Mutation``."""
        return self.types.Mutation(isDelete=False, column=column, value=value)

    def delete(self, column: bytes) -> Any:
        """A delete ``Mutation`` (a family when ``column`` is ``family:``)."""
        return self.types.Mutation(isDelete=True, column=column)

    def scan(
        self,
        start: bytes,
        stop: bytes,
        columns: list[bytes] | None = None,
        *,
        batch: int = 5000,
        filter_string: bytes | None = None,
        limit: int | None = None,
        cells_per_result: int | None = None,
    ) -> list[Any]:
        """Every ``TRowResult`` with ``start <= row < stop`` (a whole scan, retried from the start).

        With ``cells_per_result``, a wide row comes back in several results of at most that many
        cells each (HBase's ``Scan.setBatch``), one after the other.
        """

        def run() -> list[Any]:
            scan = self.types.TScan(
                startRow=start,
                stopRow=stop,
                columns=columns,
                caching=batch,
                filterString=filter_string,
                batchSize=cells_per_result,
            )
            sid = self.call("scannerOpenWithScan", self.table, scan, {}, retry=False)
            out: list[Any] = []
            try:
                while True:
                    want = batch if limit is None else min(batch, limit - len(out))
                    if want <= 0:
                        break
                    rows = self.call("scannerGetList", sid, want, retry=False)
                    if not rows:
                        break
                    out.extend(rows)
            finally:
                try:
                    self.call("scannerClose", sid, retry=False)
                except Exception:  # noqa: BLE001, S110 - a scanner of a dead connection is gone anyway
                    pass
            return out

        return self.retrying(run)

    def retrying(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (made of ``retry=False`` calls), again from the start while HBase does not answer.

        Only :class:`~weir.errors.StoreUnavailableError` is retried (for :attr:`retry_for_s`); a
        permanent error ends at once.
        """
        deadline = time.monotonic() + self.retry_for_s
        delay = 0.05
        while True:
            try:
                return fn()
            except StoreUnavailableError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
