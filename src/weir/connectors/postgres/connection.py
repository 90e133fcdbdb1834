"""PostgreSQL plumbing shared by the Storm backend (:mod:`.kv`) and the Trident backing maps (:mod:`.maps`).

- :func:`import_psycopg`: the optional client library, with an install hint when it is missing.
- :func:`redact_url` / :func:`scrub`: URLs and error texts without the password.
- :func:`connect_hint`: what to fix when a connection fails; :func:`close` closes a connection.
- :func:`connect`: one autocommit connection with weir's timeouts; :func:`run_guarded`: one call
  bounded by the socket watchdog, rerun once on a fresh connection when the old one broke before
  anything can have been applied. Both adapters connect and retry only through these two.

Connections are cached per process and thread by :mod:`weir.state.connections` (never used across
``fork()``); each adapter runs its writes in one psycopg transaction (``conn.transaction()`` or
explicit ``BEGIN``/``COMMIT`` on an autocommit connection) and translates psycopg errors into
:class:`~weir.errors.StateError` / :class:`~weir.errors.ConfigError` naming the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from weir._redact import collect_secrets, redact_text
from weir._redact import redact_url as _redact_url
from weir._util import positive_float
from weir.errors import ConfigError
from weir.state.watchdog import WATCHDOG

__all__ = [
    "FailedCall",
    "close",
    "connect",
    "connect_hint",
    "import_psycopg",
    "redact_url",
    "run_guarded",
    "scrub",
]

T = TypeVar("T")


def close(conn: Any) -> None:
    """Close ``conn`` (the closer of the per-process connection cache)."""
    conn.close()


def redact_url(url: str) -> str:
    """``url`` with its password (in the netloc or a ``password=`` query parameter) replaced by ``***``."""
    return _redact_url(url)


def scrub(exc: BaseException, url: str) -> str:
    """The error's text on one line, without the password of ``url``."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return redact_text(text, collect_secrets(url))


def import_psycopg() -> Any:
    """The ``psycopg`` module (version 3), or a ConfigError saying how to install it."""
    try:
        import psycopg
    except ImportError as exc:
        msg = (
            "weir's PostgreSQL store (the postgres provider, PostgresMapState) needs psycopg 3: "
            "pip install 'weir[postgres]'"
        )
        raise ConfigError(msg) from exc
    return psycopg


def connect_hint(text: str) -> str:
    """What to fix, judging by the text of a failed connection attempt."""
    low = text.lower()
    if "database" in low and "does not exist" in low:
        return "create the database (CREATE DATABASE ...) or fix the database name in the url"
    if "password" in low or "role" in low or "authentication" in low:
        return "check the user and password in the url (and pg_hba.conf on the server)"
    if "timeout" in low or "refused" in low or "could not translate" in low or "no route" in low:
        return "check that PostgreSQL runs and is reachable at that host and port (or raise connectTimeout)"
    return "check the url and that the server accepts connections from this machine"


def check_connection_options(
    url: object,
    connect_timeout: object,
    statement_timeout: object,
    socket_timeout: object,
    *,
    what: str,
    names: tuple[str, str, str] = ("connectTimeout", "statementTimeout", "socketTimeout"),
) -> float:
    """Validate the connection options both adapters share; the socket timeout to use.

    ``what`` names the owner in messages (``"postgres provider"``, ``"PostgresMapState"``) and
    ``names`` the three timeouts as that owner spells them. An unset ``socket_timeout`` becomes
    ``statement_timeout + 60`` (360 without a statement timeout). The url's password never appears.
    """
    if not isinstance(url, str) or not url.lower().startswith(("postgresql://", "postgres://")):
        shown = repr(redact_url(url)) if isinstance(url, str) else type(url).__name__
        msg = f"{what}: url {shown} must look like postgresql://user@host:port/database"
        raise ConfigError(msg)
    positive_float(connect_timeout, f"{what}: {names[0]}", expected="a positive number of seconds")
    for key, v in ((names[1], statement_timeout), (names[2], socket_timeout)):
        if v is None and key == names[2]:
            continue
        positive_float(v, f"{what}: {key}", allow_zero=True, expected="a number of seconds ≥ 0 (0 = no limit)")
    if socket_timeout is None:
        return float(statement_timeout) + 60.0 if statement_timeout else 360.0  # type: ignore[arg-type]
    return float(socket_timeout)  # type: ignore[arg-type]


def connect(url: str, *, connect_timeout: float, statement_timeout: float, application_name: str) -> Any:
    """A new autocommit connection to ``url`` whose session cancels statements after ``statement_timeout`` s.

    Raises psycopg's error when the server cannot be reached (callers say which store it was).
    """
    psycopg = import_psycopg()
    return psycopg.connect(
        url,
        autocommit=True,
        connect_timeout=max(2, round(connect_timeout)),
        application_name=application_name,
        options=f"-c statement_timeout={round(statement_timeout * 1000)}",
    )


@dataclass(frozen=True)
class FailedCall:
    """One failed attempt of :func:`run_guarded`, for the caller's rerun rule and error message.

    Attributes
    ----------
    exc : Exception
        psycopg's error.
    lost : bool
        Whether the connection is gone (closed, broken, or shut down by the watchdog).
    timed_out : bool
        Whether the watchdog shut the connection down after ``socket_timeout``.
    stage : {"begin", "body", "commit"}
        How far the call got: ``"commit"`` means ``COMMIT`` may have reached the server.
    """

    exc: Exception
    lost: bool
    timed_out: bool
    stage: Literal["begin", "body", "commit"]


def run_guarded(
    connection: Callable[[], Any],
    body: Callable[[Any], T],
    *,
    socket_timeout: float | None,
    in_transaction: bool,
    may_rerun: Callable[[FailedCall], bool],
    fail: Callable[[FailedCall], Exception],
    discard: Callable[[Any], None],
    label: str = "",
) -> T:
    """Run ``body(conn)`` (in one transaction if asked), bounded by ``socket_timeout``; rerun it at most once.

    1. ``connection()`` gives the connection of this process and thread (it raises the caller's
       error when none can be made).
    2. The call runs under the socket watchdog: a server that does not answer within
       ``socket_timeout`` has the connection shut down; with a ``label`` (what waits), the watchdog
       logs a warning while the call still waits.
    3. On a psycopg error, a lost connection is handed to ``discard``; if it was lost without a
       timeout and ``may_rerun`` agrees (nothing can have been applied, or the body is
       idempotent), ``body`` runs once more on a new connection.
    4. Otherwise ``fail`` turns the attempt into the error raised (naming the store and operation).
    """
    psycopg = import_psycopg()
    for attempt in (1, 2):
        conn = connection()
        stage: Literal["begin", "body", "commit"] = "begin"
        with WATCHDOG.guard(conn.pgconn.socket, socket_timeout, label) as guard:
            try:
                if not in_transaction:
                    stage = "body"
                    return body(conn)
                with conn.transaction():
                    stage = "body"
                    result = body(conn)
                    stage = "commit"
                return result
            except psycopg.Error as exc:
                failed = FailedCall(exc, bool(conn.closed or conn.broken or guard.fired), guard.fired, stage)
                if failed.lost:
                    discard(conn)
                if attempt == 1 and failed.lost and not failed.timed_out and may_rerun(failed):
                    continue
                raise fail(failed) from exc
    msg = "run_guarded: the call failed twice"  # pragma: no cover - the second attempt never continues
    raise AssertionError(msg)  # pragma: no cover
