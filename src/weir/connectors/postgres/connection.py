"""PostgreSQL plumbing shared by the Storm backend (:mod:`.kv`) and the Trident backing maps (:mod:`.maps`).

- :func:`import_psycopg`: the optional client library, with an install hint when it is missing.
- :func:`redact_url` / :func:`scrub`: URLs and error texts without the password.
- :func:`connect_hint`: what to fix when a connection fails; :func:`close` closes a connection.

Connections are cached per process and thread by :mod:`weir.state.connections` (never used across
``fork()``); each adapter runs its writes in one psycopg transaction (``conn.transaction()`` or
explicit ``BEGIN``/``COMMIT`` on an autocommit connection) and translates psycopg errors into
:class:`~weir.errors.StateError` / :class:`~weir.errors.ConfigError` naming the store.
"""

from __future__ import annotations

from typing import Any

from weir._redact import collect_secrets, redact_text
from weir._redact import redact_url as _redact_url
from weir._util import positive_float
from weir.errors import ConfigError

__all__ = ["close", "connect_hint", "import_psycopg", "redact_url", "scrub"]


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
