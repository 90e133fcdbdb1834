"""Keeping secrets out of messages, logs, status and Spark's UI: one redaction helper for every store.

A *secret* is the value of a configuration key whose last dotted part names a credential
(``password``, ``sasl.password``, ``ssl.key.password``, ``ssl.keystore.password``,
``sasl.jaas.config``, ``token``, ``secret``, ``nkey``/``seed``, ``credentials``...), the userinfo
password of a URL (``redis://:pw@host``, ``postgresql://user:pw@host``, ``nats://user:pw@host``,
``nats://TOKEN@host``), or a ``password=`` parameter of a URL query or a libpq ``key=value`` string.
Kafka client options (``sasl.password``, ``ssl.key.password``, ``sasl.jaas.config``) follow the same
rule, so the helper applies to them as well.

* :func:`redact_url` — a URL with its password (and any query value whose key looks like a
  misspelled secret, ``?pasword=``) replaced by ``***``;
* :func:`redact_config` — a deep copy of a configuration with every secret replaced by ``***``;
* :func:`collect_secrets` — the secret strings found in a configuration (to scrub free text);
* :func:`redact_text` — ``text`` with the given secrets (and any URL userinfo password) replaced.

Examples
--------
>>> redact_url("redis://:hunter2@127.0.0.1:6379/0")
'redis://:***@127.0.0.1:6379/0'
>>> redact_config({"sasl.password": "s3cret", "bootstrap.servers": "h:9092"})
{'sasl.password': '***', 'bootstrap.servers': 'h:9092'}
>>> redact_text("login failed for s3cret", ["s3cret"])
'login failed for ***'
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode

__all__ = [
    "MASK",
    "SPARK_REDACTION_REGEX",
    "SPARK_STRING_REDACTION_REGEX",
    "collect_secrets",
    "is_query_secret",
    "is_secret_key",
    "redact_config",
    "redact_text",
    "redact_url",
]

MASK = "***"

#: the last part of a (dotted, case-insensitive) key that marks its value as a secret
_SECRET_WORDS = (
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "jaas.config",
    "credentials",
    "apikey",
    "api.key",
    "access.key",
    "private.key",
    "nkey",
    "seed",
)
_SECRET_KEY_RE = re.compile(
    r"(?i)(^|[._\-])(" + "|".join(re.escape(w).replace(r"\.", r"[._\-]?") for w in _SECRET_WORDS) + r")$"
)

#: Spark's ``spark.redaction.regex`` extended with weir's secret keys (Spark hides matching conf entries
#: on the UI's environment page and in event logs)
SPARK_REDACTION_REGEX = r"(?i)secret|password|passwd|token|access[.]?key|jaas|credentials|nkey|seed"
#: Spark's ``spark.redaction.string.regex``: the userinfo of URLs inside any conf value
SPARK_STRING_REDACTION_REGEX = r"(?i)(?<=://)[^/@\s:]*:[^/@\s]+(?=@)|(?<=[?&;\s])password=[^&;\s]+"

# scheme://userinfo@ — the userinfo is everything up to the last '@' before the path
_URL_USERINFO_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^/\s@'\"]*)@")
# password=... in a query string or a libpq keyword string
_PASSWORD_PARAM_RE = re.compile(r"(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s;'\"]+)")


def is_secret_key(key: object) -> bool:
    """Whether configuration ``key`` holds a secret (``password``, ``sasl.password``, ``ssl.key.password``...)."""
    return isinstance(key, str) and bool(_SECRET_KEY_RE.search(key.strip()))


#: words a misspelled secret query parameter is compared with (``?pasword=``, ``?passwrod=``, ``?tokne=``)
_NEAR_SECRET_WORDS = ("password", "passwd", "secret", "token", "apikey", "credentials", "sslpassword")


def is_query_secret(key: object) -> bool:
    """Whether URL query parameter ``key`` holds a secret or looks like a misspelled secret key.

    ``?pasword=hunter2`` is refused by the store as an unknown parameter; the error message quotes
    the url, so its value is hidden like a password's.
    """
    if is_secret_key(key):
        return True
    if not isinstance(key, str):
        return False
    last = re.split(r"[._\-]", key.strip().lower())[-1]
    return len(last) >= 4 and bool(difflib.get_close_matches(last, _NEAR_SECRET_WORDS, n=1, cutoff=0.8))


#: schemes whose bare userinfo (no ``:``) is a user name, not a password or token
_USER_ONLY_SCHEMES = ("postgres", "mysql", "kafka", "sasl", "http", "ftp", "ssh")


def _masked_userinfo(scheme: str, userinfo: str) -> str:
    user, has_pw, _pw = userinfo.partition(":")
    if has_pw:
        return f"{user}:{MASK}"
    if not userinfo or scheme.lower().startswith(_USER_ONLY_SCHEMES):
        return userinfo
    # a bare userinfo is a password (redis://pw@host) or a token (nats://TOKEN@host)
    return MASK


def _mask_userinfo(match: re.Match[str]) -> str:
    return f"{match.group(1)}{_masked_userinfo(match.group(1), match.group(2))}@"


def redact_url(url: str) -> str:
    """``url`` with the password of its userinfo and any ``password=`` query value replaced by ``***``.

    A URL with a user and no password keeps the user (``postgresql://weir@host/db``); a userinfo
    without ``:`` (``redis://pw@host``, ``nats://token@host``) is taken as a secret.
    """
    if not isinstance(url, str):
        return MASK
    scheme, sep, rest = url.partition("://")
    if not sep:  # no scheme: hide anything before an '@' (user:password@host)
        user_part, at_sign, host_part = url.rpartition("@")
        masked = f"{_masked_userinfo('', user_part)}@{host_part}" if at_sign else url
        return _PASSWORD_PARAM_RE.sub(lambda m: m.group(1) + MASK, masked)
    # userinfo ends at the last '@' before the path (a password may itself contain '@' or '/')
    cut = len(rest)
    for ch in "?#":
        i = rest.find(ch)
        if i >= 0:
            cut = min(cut, i)
    at_pos = rest.rfind("@", 0, cut)
    if at_pos >= 0:
        rest = _masked_userinfo(scheme, rest[:at_pos]) + rest[at_pos:]
    head, q, query = rest.partition("?")
    if q:
        query, hsh, frag = query.partition("#")
        pairs = [(k, MASK if is_query_secret(k) else v) for k, v in parse_qsl(query, keep_blank_values=True)]
        rest = head + "?" + urlencode(pairs, safe="*/:,") + hsh + frag
    return f"{scheme}://{rest}"


def redact_config(obj: Any, *, key: str | None = None) -> Any:
    """A copy of ``obj`` (dicts, lists, strings) with secret values and URL passwords replaced by ``***``."""
    if key is not None and is_secret_key(key) and obj not in (None, ""):
        return MASK
    if isinstance(obj, Mapping):
        return {k: redact_config(v, key=str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact_config(v) for v in obj)
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def collect_secrets(obj: Any, *, key: str | None = None) -> list[str]:
    """Every secret string in ``obj``: values of secret keys and URL userinfo passwords (longest first)."""
    found: set[str] = set()

    def walk(o: Any, k: str | None) -> None:
        if k is not None and is_secret_key(k) and o not in (None, ""):
            found.add(str(o))
            return
        if isinstance(o, Mapping):
            for kk, vv in o.items():
                walk(vv, str(kk))
        elif isinstance(o, (list, tuple, set, frozenset)):
            for vv in o:
                walk(vv, None)
        elif isinstance(o, str):
            for m in _URL_USERINFO_RE.finditer(o):
                user, has_pw, pw = m.group(2).partition(":")
                secret = pw if has_pw else ("" if m.group(1).lower().startswith(_USER_ONLY_SCHEMES) else user)
                if secret:
                    found.update({secret, unquote(secret)})
            for m in _PASSWORD_PARAM_RE.finditer(o):
                found.update({m.group(2).strip("'"), unquote(m.group(2).strip("'"))})
            if "://" in o and "?" in o:
                query = o.split("?", 1)[1].split("#", 1)[0]
                found.update(v for k, v in parse_qsl(query, keep_blank_values=True) if v and is_query_secret(k))

    walk(obj, key)
    return sorted((s for s in found if len(s) >= 3 and s != MASK), key=len, reverse=True)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets``, every URL userinfo password and ``password=...`` replaced by ``***``.

    Secrets shorter than 3 characters are not searched for (they would mask unrelated text); their
    URL forms are still hidden.
    """
    out = str(text)
    for s in sorted({str(s) for s in secrets if s}, key=len, reverse=True):
        if len(s) >= 3:
            out = out.replace(s, MASK)
    out = _URL_USERINFO_RE.sub(_mask_userinfo, out)
    return _PASSWORD_PARAM_RE.sub(lambda m: m.group(1) + MASK, out)
