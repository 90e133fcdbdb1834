"""``NatsSpout``: a NATS JetStream stream read by stream-sequence range.

Offsets are ``{"seq": N, "stream": NAME}``: the last stream sequence of a batch. A batch is the
range ``(start seq, end seq]``, read with a short-lived pull consumer that starts at
``start seq + 1`` (``DeliverPolicy.BY_START_SEQUENCE``, no acks) and stops at ``end seq``. nats-py
is asynchronous; each read runs it on a private event loop, so the spout works in Spark's plain
Python workers.

Stream sequences have no holes of their own, so without a subject filter a missing sequence inside
a range is exactly a message the stream's limits (``max_msgs``, ``max_bytes``, ``max_age``) or a
delete removed before the batch read it. With a subject filter on a stream of several subjects the
spout cannot tell whose message a removed sequence held; it reports a range whose start the
stream's head has passed (the spout fell behind retention) as a possible loss. A ``TRANSACTIONAL``
spout fails such a batch with a :class:`~weir.errors.SourceError`; an ``OPAQUE`` one logs a warning
and continues with what is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from weir._redact import collect_secrets, redact_text, redact_url
from weir._util import positive_float, positive_int
from weir.errors import ConfigError, SourceError, TransientSourceError
from weir.sources.replayable import Offset, ReadLimit, ReplayableSpout
from weir.sources.schema import Column, converter, parse_columns
from weir.topology.components import Guarantee

# what a creds or seed file holds, never shown in an error: NKey seeds and JWTs
_NKEY_SEED_RE = re.compile(r"\bS[OAUNC][A-Z2-7]{50,}\b")
_JWT_RE = re.compile(r"\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")

__all__ = ["NatsSpout"]


def _check_creds_file(path: str) -> None:
    """Refuse a ``creds_file`` that is not a NATS ``.creds`` file (its content is never shown)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 20)
    except OSError as exc:
        msg = f"NatsSpout: creds_file {path!r} cannot be read ({exc.strerror})"
        raise ConfigError(msg) from None
    if not (_JWT_RE.search(text) and _NKEY_SEED_RE.search(text) and "NATS USER JWT" in text):
        msg = (
            f"NatsSpout: creds_file {path!r} is not a NATS .creds file (a '-----BEGIN NATS USER JWT-----' "
            "block with the user JWT, then the user's NKey seed block), as `nsc generate creds` writes"
        )
        raise ConfigError(msg)


log = logging.getLogger("weir.sources")

T = TypeVar("T")

_NO_MESSAGES = ("404", "408")
_MIN_PART_SEQS = 5000  # fewer sequences per sub-range are not worth another Spark task


class NatsSpout(ReplayableSpout):
    """Messages of a NATS JetStream stream, read exactly once per committed batch.

    Parameters
    ----------
    url : ``nats://host:port`` (several servers: comma-separated)
    stream : the JetStream stream's name (it must exist)
    subject : only messages on this subject (wildcards allowed); ``None``: every message
    fields : output fields; with ``format="raw"`` one field (default ``["data"]``) holds the payload,
        with ``format="json"`` each field is a key of the payload's JSON object
    schema : DDL of those fields (default: all ``STRING``), e.g. ``"user STRING, n BIGINT"`` or
        ``"data BINARY"`` for raw bytes
    format : ``"raw"`` or ``"json"``
    start : ``"first"`` (default: from the stream's first message), ``"new"`` (only messages
        published after the topology first starts) or a stream sequence to start at
    max_records_per_batch, max_bytes_per_batch : back-pressure per batch (bytes use the stream's
        average message size)
    guarantee : ``TRANSACTIONAL`` (default) or ``OPAQUE``; see the module docs for trimmed ranges
    subject_field, seq_field : also emit the message subject (``STRING``) / stream sequence (``BIGINT``)
    fetch_batch : messages per pull request
    read_partitions : sequence sub-ranges a batch is read in, in parallel (at least 5000
        sequences each)
    connect_timeout_s : how long to retry an unreachable server before failing
    request_timeout_s : how long to wait for one JetStream reply
    tls_ca_file : PEM file of the CA that signed the server's certificate (turns TLS on, as does a
        ``tls://`` url)
    tls_cert_file, tls_key_file : the client's certificate and key, for a server that verifies clients
    tls_hostname : the name to check the server's certificate against (default: the url's host)
    creds_file : a NATS ``.creds`` file (user JWT and NKey seed, decentralized auth)
    nkey_seed_file : a file holding an NKey seed (``SU...``), for NKey authentication
    user, password, token : plain credentials (or put them in the url: ``nats://user:pw@host``)

    Credentials never appear in messages, ``describe()`` or logs: the url is shown with ``***``.

    Examples
    --------
    >>> spout = NatsSpout("nats://127.0.0.1:4222", "ORDERS", subject="orders.>", format="json",
    ...                   schema="customer STRING, amount DOUBLE", max_records_per_batch=50_000)
    """

    def __init__(
        self,
        url: str,
        stream: str,
        subject: str | None = None,
        fields: Sequence[str] | None = None,
        schema: str | None = None,
        *,
        format: str = "raw",  # noqa: A002 - the natural name
        start: str | int = "first",
        max_records_per_batch: int | None = None,
        max_bytes_per_batch: int | None = None,
        guarantee: Guarantee = Guarantee.TRANSACTIONAL,
        subject_field: str | None = None,
        seq_field: str | None = None,
        fetch_batch: int = 5000,
        read_partitions: int = 2,
        connect_timeout_s: float = 10.0,
        request_timeout_s: float = 5.0,
        tls_ca_file: str | None = None,
        tls_cert_file: str | None = None,
        tls_key_file: str | None = None,
        tls_hostname: str | None = None,
        creds_file: str | None = None,
        nkey_seed_file: str | None = None,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
    ) -> None:
        if not isinstance(url, str) or not url.strip():
            shown = repr(redact_url(url)) if isinstance(url, str) else type(url).__name__
            msg = f"NatsSpout: url must be 'nats://host:port', got {shown}"
            raise ConfigError(msg)
        self.servers = [u.strip() for u in url.split(",") if u.strip()]
        self._secrets = collect_secrets({"url": url, "password": password, "token": token})
        for what, path in (
            ("tls_ca_file", tls_ca_file),
            ("tls_cert_file", tls_cert_file),
            ("tls_key_file", tls_key_file),
            ("creds_file", creds_file),
            ("nkey_seed_file", nkey_seed_file),
        ):
            if path is not None and not (isinstance(path, str) and os.path.isfile(path)):
                msg = f"NatsSpout: {what} {path!r} is not a readable file"
                raise ConfigError(msg)
        if (tls_cert_file is None) != (tls_key_file is None):
            msg = "NatsSpout: tls_cert_file and tls_key_file go together (the client's certificate and key)"
            raise ConfigError(msg)
        if creds_file and nkey_seed_file:
            msg = "NatsSpout: give creds_file or nkey_seed_file, not both"
            raise ConfigError(msg)
        if creds_file:
            _check_creds_file(creds_file)
        for what, v in (("user", user), ("password", password), ("token", token), ("tls_hostname", tls_hostname)):
            if v is not None and not isinstance(v, str):
                msg = f"NatsSpout: {what} must be a string, got {type(v).__name__}"
                raise ConfigError(msg)
        self.tls_ca_file = tls_ca_file
        self.tls_cert_file = tls_cert_file
        self.tls_key_file = tls_key_file
        self.tls_hostname = tls_hostname
        self.creds_file = creds_file
        self.nkey_seed_file = nkey_seed_file
        self.user = user
        self.password = password
        self.token = token
        if not isinstance(stream, str) or not stream or any(c in stream for c in " .*>\t"):
            msg = f"NatsSpout: stream must be a JetStream stream name (no spaces, '.', '*' or '>'), got {stream!r}"
            raise ConfigError(msg)
        self.stream = stream
        self.subject = subject or None
        if format not in ("raw", "json"):
            msg = f"NatsSpout({stream!r}): format must be 'raw' or 'json', got {format!r}"
            raise ConfigError(msg)
        self.format = format
        if isinstance(start, bool) or not (start in ("first", "new") or (isinstance(start, int) and start >= 1)):
            msg = f"NatsSpout({stream!r}): start must be 'first', 'new' or a stream sequence ≥ 1, got {start!r}"
            raise ConfigError(msg)
        self.start = start
        if not isinstance(guarantee, Guarantee):
            msg = f"NatsSpout({stream!r}): guarantee must be a weir.topology.Guarantee, got {guarantee!r}"
            raise ConfigError(msg)
        self.guarantee = guarantee
        self.fetch_batch = positive_int(fetch_batch, f"NatsSpout({stream!r}): fetch_batch")
        self.read_partitions = positive_int(read_partitions, f"NatsSpout({stream!r}): read_partitions")
        seconds = "a positive number of seconds"
        self.connect_timeout_s = positive_float(
            connect_timeout_s, f"NatsSpout({stream!r}): connect_timeout_s", expected=seconds
        )
        self.request_timeout_s = positive_float(
            request_timeout_s, f"NatsSpout({stream!r}): request_timeout_s", expected=seconds
        )
        self.max_records_per_batch = max_records_per_batch
        self.max_bytes_per_batch = max_bytes_per_batch
        if format == "raw" and fields is None and schema is None:
            fields = ["data"]
        self.payload_columns = parse_columns(schema, fields, where=self.describe())
        if format == "raw" and len(self.payload_columns) != 1:
            msg = f"{self.describe()}: format='raw' puts the payload in one field; use format='json' for several"
            raise ConfigError(msg)
        self.subject_field = subject_field
        self.seq_field = seq_field
        meta = [Column(subject_field, "STRING")] if subject_field else []
        meta += [Column(seq_field, "BIGINT")] if seq_field else []
        self._columns = parse_columns(
            ", ".join(f"{c.name} {c.type}" for c in self.payload_columns + meta), None, where=self.describe()
        )
        self.fields = [c.name for c in self._columns]
        self.corrupt_column = True
        self.read_limit()

    def describe(self) -> str:
        """``NatsSpout(nats://host:port, stream=NAME[, subject=...])``."""
        subj = f", subject={self.subject!r}" if self.subject else ""
        return f"NatsSpout({self._where()}, stream={self.stream!r}{subj})"

    def _where(self) -> str:
        """The server urls without credentials."""
        return ",".join(redact_url(u) for u in self.servers)

    def scrub(self, text: str) -> str:
        """``text`` without this spout's secrets (url userinfo, password, token, NKey seeds, JWTs)."""
        return redact_text(_NKEY_SEED_RE.sub("***", _JWT_RE.sub("***", text)), self._secrets)

    def _credentials(self) -> str:
        """The credentials in use, for an error (file paths and user name; never a secret)."""
        parts = [
            f"{what} {path!r}"
            for what, path in (("creds_file", self.creds_file), ("nkey_seed_file", self.nkey_seed_file))
            if path
        ]
        if self.user is not None:
            parts.append(f"user {self.user!r} with a password" if self.password is not None else f"user {self.user!r}")
        if self.token is not None:
            parts.append("a token")
        if any("@" in u.split("://", 1)[-1].split("/", 1)[0] for u in self.servers):
            parts.append("the url's user information")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return self.describe()

    def _tls_context(self) -> Any:
        """An ``ssl.SSLContext`` for the TLS options, or None (made in the process that connects)."""
        tls_url = any(u.lower().startswith("tls://") for u in self.servers)
        if not (self.tls_ca_file or self.tls_cert_file or tls_url):
            return None
        import ssl

        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.tls_ca_file)
        if self.tls_cert_file:
            ctx.load_cert_chain(self.tls_cert_file, self.tls_key_file)
        return ctx

    def _auth_options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {}
        tls = self._tls_context()
        if tls is not None:
            opts["tls"] = tls
            if self.tls_hostname:
                opts["tls_hostname"] = self.tls_hostname
        if self.creds_file:
            opts["user_credentials"] = self.creds_file
        if self.nkey_seed_file:
            opts["nkeys_seed"] = self.nkey_seed_file
        if self.user is not None:
            opts["user"] = self.user
        if self.password is not None:
            opts["password"] = self.password
        if self.token is not None:
            opts["token"] = self.token
        return opts

    def columns(self) -> list[Column]:
        """Payload fields, then the subject / sequence fields if asked for."""
        return list(self._columns)

    # ---- async plumbing ----------------------------------------------------------------------
    def _run(self, make: Callable[[Any], Awaitable[T]], what: str) -> T:
        """Connect on a private event loop, run ``make(nc)``, disconnect."""
        loop = asyncio.new_event_loop()
        try:
            nc = loop.run_until_complete(self._connect(what))
            try:
                return loop.run_until_complete(make(nc))
            finally:
                with contextlib.suppress(Exception):
                    loop.run_until_complete(nc.close())
        finally:
            loop.close()

    async def _connect(self, what: str) -> Any:
        try:
            import nats
        except ImportError as exc:  # pragma: no cover - packaging
            msg = "NatsSpout needs nats-py: pip install 'weir[nats]'"
            raise ConfigError(msg) from exc

        async def quiet(_exc: Exception) -> None:
            return None

        deadline = time.monotonic() + self.connect_timeout_s
        delay = 0.05
        while True:
            try:
                # max_reconnect_attempts=0 would mean "forever" in nats-py: try each server twice, then
                # give up (this loop retries until connect_timeout_s)
                return await asyncio.wait_for(
                    nats.connect(
                        servers=self.servers,
                        connect_timeout=min(2.0, max(0.1, self.connect_timeout_s)),
                        allow_reconnect=False,
                        max_reconnect_attempts=1,
                        reconnect_time_wait=0.05,
                        error_cb=quiet,
                        name="weir-nats-spout",
                        **self._auth_options(),
                    ),
                    timeout=max(1.0, min(10.0, self.connect_timeout_s)),
                )
            except Exception as exc:
                text = self.scrub(f"{type(exc).__name__}: {exc}")
                creds = self._credentials()
                refused = "authorization" in text.lower() or "auth" in type(exc).__name__.lower()
                if refused or time.monotonic() + delay > deadline:
                    if refused or creds:
                        hint = (
                            f"the server refused the credentials ({creds or 'none given'}): check them (a "
                            "creds file's user JWT must be signed by an account the server trusts and match "
                            "its seed)"
                            if refused
                            else f"start the server or fix the url or the credentials ({creds})"
                        )
                    else:
                        hint = "start the server or fix the url"
                    msg = f"{self.describe()}: {what}: cannot connect to NATS ({text}); {hint}"
                    if refused:  # permanent: the same credentials will be refused again
                        raise SourceError(msg) from None
                    raise TransientSourceError(msg) from None
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def _stream_info(self, nc: Any) -> Any:
        from nats.js.errors import NotFoundError

        js = nc.jetstream(timeout=self.request_timeout_s)
        try:
            return await js.stream_info(self.stream)
        except NotFoundError as exc:
            msg = (
                f"{self.describe()}: JetStream stream {self.stream!r} does not exist; create it first "
                "(nats stream add, or js.add_stream(name=..., subjects=[...]))"
            )
            raise SourceError(msg) from exc

    async def _state(self, nc: Any) -> Any:
        return (await self._stream_info(nc)).state

    def _check_not_reset(self, start: Offset, s: int, info: Any) -> None:
        """Refuse a committed sequence the stream no longer has: the stream deleted and created again.

        Stream sequences only grow (a purge moves the first sequence up and keeps the last), so a last
        sequence below the committed one, or another creation time than the one the offsets were read
        under, is another stream under the same name.
        """
        created = _created(info)
        was = start.get("created")
        last = int(info.state.last_seq)
        if last < s:
            found = f"its last sequence is {last}, below the committed sequence {s}"
        elif was is not None and created is not None and was != created:
            found = f"it was created at {created}, the committed sequence {s} was read from the one created at {was}"
        else:
            return
        msg = (
            f"{self.describe()}: JetStream stream {self.stream!r} was deleted and created again: {found}. Its "
            "sequences now mean other messages, so weir neither skips nor re-reads them silently. To read the "
            "stream as it is now, run the topology on a new Spark checkpoint (weir.spark.checkpoint.location) or "
            "under a new spout id; to go on where it was, restore the stream"
        )
        raise SourceError(msg)

    def _offset(self, seq: int) -> Offset:
        return {"seq": int(seq), "stream": self.stream}

    def _seq(self, offset: Offset, what: str) -> int:
        if offset.get("stream", self.stream) != self.stream:
            msg = (
                f"{self.describe()}: the {what} offset belongs to stream {offset.get('stream')!r}; the checkpoint "
                "was made for another stream — use a new topology name or weir.spark.checkpoint.location"
            )
            raise SourceError(msg)
        return int(offset["seq"])

    # ---- offsets ---------------------------------------------------------------------------
    def initial_offset(self) -> Offset:
        """Before the first message (``"first"``), after the last (``"new"``) or before sequence ``start``."""
        if isinstance(self.start, int):
            return self._offset(self.start - 1)
        info = self._run(self._stream_info, "reading the stream's state")
        state = info.state
        out = self._offset(state.last_seq) if self.start == "new" else self._offset(max(0, state.first_seq - 1))
        created = _created(info)
        if created is not None:
            out["created"] = created
        return out

    def latest_offset(self, start: Offset, limit: ReadLimit) -> Offset:
        """The stream's last sequence, or the last one the limit admits (at most that many messages)."""
        s = self._seq(start, "start")
        info = self._run(self._stream_info, "reading the stream's state")
        self._check_not_reset(start, s, info)
        state = info.state
        last = int(state.last_seq)
        if last <= s:
            return start
        base = max(s, int(state.first_seq) - 1)  # sequences before the head are gone: do not count them
        end = last
        if limit.max_records is not None:
            end = min(end, base + limit.max_records)
        if limit.max_bytes is not None:
            avg = max(1, int(state.bytes) // max(1, int(state.messages)))
            end = min(end, base + max(1, limit.max_bytes // avg))
        out = self._offset(end)
        created = _created(info)
        if created is not None:
            out["created"] = created
        return out

    def source_lag(self, end_offset: Any) -> int | None:
        """Messages in the stream after ``end_offset``'s sequence."""
        if not isinstance(end_offset, dict) or "seq" not in end_offset:
            return None
        s = self._seq(end_offset, "end")
        state = self._run(self._state, "reading the stream's state")
        return max(0, int(state.last_seq) - max(s, int(state.first_seq) - 1))

    def partitions(self, start: Offset, end: Offset) -> Sequence[tuple[Offset, Offset]]:
        """The range cut into up to ``read_partitions`` sequence sub-ranges (5000 or more each)."""
        s, e = self._seq(start, "start"), self._seq(end, "end")
        if e <= s:
            return []
        k = max(1, min(self.read_partitions, (e - s) // _MIN_PART_SEQS))
        cuts = [s + (e - s) * j // k for j in range(k + 1)]
        return [(self._offset(a), self._offset(b)) for a, b in zip(cuts, cuts[1:], strict=False)]

    # ---- reading ---------------------------------------------------------------------------
    def read(self, start: Offset, end: Offset) -> Iterable[Any]:
        """The messages with sequences in ``(start, end]`` (on ``subject``), as Arrow record batches (one per pull)."""
        s, e = self._seq(start, "start"), self._seq(end, "end")
        if e <= s:
            return
        build = self._page_builder()
        loop = asyncio.new_event_loop()
        puller: _Puller | None = None
        try:
            nc = loop.run_until_complete(self._connect(f"reading ({s}, {e}]"))
            puller = _Puller(nc, self, s + 1)
            loop.run_until_complete(puller.open())
            expected, gaps = s + 1, []
            while True:
                want = min(self.fetch_batch, e - expected + 1) if self.subject is None else self.fetch_batch
                msgs = loop.run_until_complete(puller.pull(max(1, want)))
                done = len(msgs) < want
                page = []
                for msg in msgs:
                    seq, pending = msg[0], msg[1]
                    if seq > e:
                        done = True
                        break
                    if seq > expected:
                        gaps.append((expected, seq - 1))
                    expected = seq + 1
                    page.append(msg)
                    if seq == e or pending == 0:
                        done = True
                if page:
                    yield build(page)
                if done:
                    break
            if expected <= e:
                gaps.append((expected, e))
            first_seq = None
            if self.subject is not None:
                state = loop.run_until_complete(self._state(nc))
                first_seq = int(state.first_seq)
                gaps = [(s + 1, min(e, first_seq - 1))] if first_seq > s + 1 else []
            elif gaps:
                first_seq = int(loop.run_until_complete(self._state(nc)).first_seq)
            if gaps:
                self._lost(s, e, gaps, first_seq)
        finally:
            if puller is not None:
                with contextlib.suppress(Exception):
                    loop.run_until_complete(puller.close())
            loop.close()

    def _page_builder(self) -> Callable[[list[tuple[int, int, str, bytes]]], Any]:
        """A function turning one pull's messages into a record batch, column by column.

        A page with a payload that does not convert is converted message by message instead,
        which marks exactly the malformed messages.
        """
        import pyarrow as pa

        from weir.sources.columnar import ARROW_TYPES, Unconvertible, arrow_column, record_batch
        from weir.sources.replayable import to_batch

        names, types = self.arrow_layout()
        cols = [(c.name, c.type, converter(c.type)) for c in self.payload_columns]
        raw = self.format == "raw"
        with_subject, with_seq = self.subject_field is not None, self.seq_field is not None
        convert = self._converter()

        def build(page: list[tuple[int, int, str, bytes]]) -> Any:
            n = len(page)
            try:
                if raw:
                    name, type_name, conv = cols[0]
                    arrays = [arrow_column([m[3] for m in page], type_name, conv)]
                else:
                    objs = [json.loads(m[3]) for m in page]
                    if not all(type(o) is dict for o in objs):
                        raise ValueError("not every payload is a JSON object")  # noqa: EM101, TRY301
                    arrays = [pa.array([conv(o.get(name)) for o in objs], ARROW_TYPES[t]) for name, t, conv in cols]
            except Unconvertible:
                return to_batch([convert(m[0], m[2], m[3]) for m in page], names, types, self.describe())
            if with_subject:
                arrays.append(pa.array([m[2] for m in page], pa.string()))
            if with_seq:
                arrays.append(pa.array([m[0] for m in page], pa.int64()))
            return record_batch(arrays, names, n)

        return build

    def _converter(self) -> Callable[[int, str, bytes], tuple[Any, ...]]:
        cols = [(c.name, converter(c.type)) for c in self.payload_columns]
        width = len(self._columns)
        raw = self.format == "raw"
        raw_conv = cols[0][1]
        with_subject, with_seq = self.subject_field is not None, self.seq_field is not None
        stream = self.stream

        def convert(seq: int, subject: str, data: bytes) -> tuple[Any, ...]:
            try:
                if raw:
                    out = [raw_conv(data)]
                else:
                    obj = json.loads(data)
                    if not isinstance(obj, dict):
                        msg = f"the payload is a JSON {type(obj).__name__}, not an object"
                        raise ValueError(msg)
                    out = [conv(obj.get(name)) for name, conv in cols]
            except (ValueError, UnicodeDecodeError) as exc:
                return (*([None] * width), f"stream {stream!r} sequence {seq} ({subject}): {exc}")
            if with_subject:
                out.append(subject)
            if with_seq:
                out.append(seq)
            out.append(None)
            return tuple(out)

        return convert

    def _lost(self, s: int, e: int, gaps: list[tuple[int, int]], first_seq: int | None) -> None:
        spans = ", ".join(f"{a}" if a == b else f"{a}..{b}" for a, b in gaps[:10]) + (" ..." if len(gaps) > 10 else "")
        maybe = "may have lost" if self.subject is not None else "lost"
        head = f"the stream now starts at sequence {first_seq}" if first_seq is not None else ""
        what = (
            f"NATS stream {self.stream!r} ({self._where()}) {maybe} sequence(s) {spans} of range ({s}, {e}]: "
            f"removed by the stream's limits (max_msgs/max_bytes/max_age) or deleted before this batch read them"
            + (f"; {head}" if head else "")
        )
        if self.guarantee is Guarantee.TRANSACTIONAL:
            msg = (
                f"{what}. A TRANSACTIONAL spout cannot replay this batch: raise the stream's limits, or declare "
                "guarantee=Guarantee.OPAQUE to continue with the messages that are left"
            )
            raise SourceError(msg)
        log.warning("%s; continuing with the messages that are left (guarantee %s)", what, self.guarantee.value)


def _created(info: Any) -> str | None:
    """The stream's creation time as text (None when the server does not say)."""
    created = getattr(info, "created", None)
    return None if created is None else str(created)


class _Puller:
    """A pull consumer starting at one stream sequence, fed by raw ``no_wait`` pull requests."""

    def __init__(self, nc: Any, spout: NatsSpout, first: int) -> None:
        self.nc = nc
        self.spout = spout
        self.first = first
        self.name = "weir_" + uuid.uuid4().hex[:16]
        self.inbox = ""
        self.sub: Any = None
        self.got: list[tuple[int, int, str, bytes]] = []
        self.want = 0
        self.done = asyncio.Event()
        self.error: str | None = None

    async def open(self) -> None:
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        js = self.nc.jetstream(timeout=self.spout.request_timeout_s)
        cfg = ConsumerConfig(
            name=self.name,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=self.first,
            ack_policy=AckPolicy.NONE,
            filter_subject=self.spout.subject,
            inactive_threshold=60.0,
            mem_storage=True,
            num_replicas=1,
        )
        await js.add_consumer(self.spout.stream, cfg)
        self.inbox = self.nc.new_inbox()
        self.sub = await self.nc.subscribe(
            self.inbox, cb=self._on_msg, pending_msgs_limit=1_000_000, pending_bytes_limit=1 << 30
        )

    async def _on_msg(self, msg: Any) -> None:
        headers = msg.headers
        if headers and not msg.data and headers.get("Status"):
            status = str(headers.get("Status"))
            if status not in _NO_MESSAGES:
                self.error = f"{status} {headers.get('Description', '')}".strip()
            self.done.set()
            return
        seq, pending = _seq_pending(msg)
        self.got.append((seq, pending, msg.subject, msg.data))
        if len(self.got) >= self.want:
            self.done.set()

    async def pull(self, n: int) -> list[tuple[int, int, str, bytes]]:
        """Up to ``n`` next messages (fewer when the stream has no more)."""
        self.got, self.want, self.error = [], n, None
        self.done.clear()
        req = json.dumps({"batch": n, "no_wait": True}).encode()
        await self.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{self.spout.stream}.{self.name}", req, reply=self.inbox)
        try:
            await asyncio.wait_for(self.done.wait(), self.spout.request_timeout_s)
        except asyncio.TimeoutError as exc:
            if self.got:
                return self.got
            msg = f"{self.spout.describe()}: no reply to a pull request within {self.spout.request_timeout_s}s"
            raise TransientSourceError(msg) from exc
        if self.error:
            msg = f"{self.spout.describe()}: the pull request failed: {self.spout.scrub(self.error)}"
            raise SourceError(msg)
        return self.got

    async def close(self) -> None:
        if self.sub is not None:
            with contextlib.suppress(Exception):
                await self.sub.unsubscribe()
        with contextlib.suppress(Exception):
            await self.nc.jetstream().delete_consumer(self.spout.stream, self.name)
        await self.nc.close()


def _seq_pending(msg: Any) -> tuple[int, int]:
    """Stream sequence and pending count from a JetStream reply subject (both ack formats)."""
    toks = (msg.reply or "").split(".")
    if len(toks) == 9:  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
        return int(toks[5]), int(toks[8])
    if len(toks) >= 12:  # $JS.ACK.<domain>.<account>.<stream>.<consumer>.<dlv>.<sseq>.<cseq>.<ts>.<pending>.<tok>
        return int(toks[7]), int(toks[10])
    md = msg.metadata
    return int(md.sequence.stream), int(md.num_pending)
