"""Small helpers shared by every package."""

from __future__ import annotations

import hashlib
import importlib
import math
import re
from collections.abc import Callable
from typing import Any

from weir.errors import ConfigError

__all__ = [
    "flag",
    "import_object",
    "java_class_name",
    "positive_float",
    "positive_int",
    "stable_hash",
    "validate_identifier",
]


def flag(value: Any, what: str) -> bool:
    """``value`` of option ``what`` as a bool: a bool, ``1``/``0`` or ``"true"``/``"false"``/``"yes"``/``"no"``.

    >>> flag("yes", "weir.trident.allow.inexact")
    True
    >>> flag("maybe", "weir.trident.allow.inexact")
    Traceback (most recent call last):
    ...
    weir.errors.ConfigError: weir.trident.allow.inexact must be true or false, got 'maybe'
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    msg = f"{what} must be true or false, got {value!r}"
    raise ConfigError(msg)


def positive_int(
    value: Any,
    what: str,
    *,
    minimum: int = 1,
    error: Callable[[str], Exception] = ConfigError,
    expected: str | None = None,
) -> int:
    """``value`` when it is an ``int`` ≥ ``minimum`` (a ``bool`` is not); else raise ``error``.

    The message names ``what`` and the value: ``"<what> must be a positive int, got 0"`` (or
    ``expected`` instead of "a positive int", e.g. "an integer ≥ 0").

    >>> positive_int(3, "parallelism")
    3
    >>> positive_int(True, "parallelism")
    Traceback (most recent call last):
    ...
    weir.errors.ConfigError: parallelism must be a positive int, got True
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        bound = expected or ("a positive int" if minimum == 1 else f"an integer ≥ {minimum}")
        msg = f"{what} must be {bound}, got {value!r}"
        raise error(msg)
    return value


def positive_float(
    value: Any,
    what: str,
    *,
    allow_zero: bool = False,
    error: Callable[[str], Exception] = ConfigError,
    expected: str | None = None,
) -> float:
    """``value`` as a ``float`` when it is a finite number > 0 (≥ 0 with ``allow_zero``); else raise ``error``.

    For durations in seconds and other real-valued options: an ``int`` or ``float`` (a ``bool`` is
    not, nor NaN or infinity). The message names ``what`` and the value: ``"<what> must be a
    positive number, got 0"`` (or ``expected`` instead of "a positive number", e.g. "a positive
    number of seconds").

    >>> positive_float(2, "timeout")
    2.0
    >>> positive_float(0, "timeout", expected="a positive number of seconds")
    Traceback (most recent call last):
    ...
    weir.errors.ConfigError: timeout must be a positive number of seconds, got 0
    >>> positive_float(0, "statement_timeout", allow_zero=True)
    0.0
    """
    ok = (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(value)
        and (value >= 0 if allow_zero else value > 0)
    )
    if not ok:
        bound = expected or ("a number ≥ 0" if allow_zero else "a positive number")
        msg = f"{what} must be {bound}, got {value!r}"
        raise error(msg)
    return float(value)


def import_object(path: str) -> Any:
    """Import ``package.module.Name`` (or ``package.module:Name``) and return the object."""
    if ":" in path:
        mod_name, _, attr = path.partition(":")
    else:
        mod_name, _, attr = path.rpartition(".")
    if not mod_name or not attr:
        msg = f"{path!r} is not a dotted path to a class (expected 'package.module.ClassName')"
        raise ConfigError(msg)
    try:
        module = importlib.import_module(mod_name)
    except ImportError as exc:
        msg = f"cannot import module {mod_name!r} for {path!r}: {exc}"
        raise ConfigError(msg) from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            msg = f"module {mod_name!r} has no attribute {attr!r} (from {path!r})"
            raise ConfigError(msg) from exc
    return obj


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def validate_identifier(name: str, *, what: str) -> str:
    """Return ``name`` if it is a safe SQL identifier, else raise :class:`ConfigError`."""
    if not isinstance(name, str) or not _IDENT.match(name):
        msg = f"{what} {name!r} is not a valid SQL identifier (letters, digits and _, not starting with a digit)"
        raise ConfigError(msg)
    return name


#: key types a cache of hashes may hold: exact types only (``1 == 1.0 == True`` share a dict slot, not a hash)
HASH_CACHEABLE = (str, int, bytes)


def stable_hash(value: Any) -> int:
    """A hash of ``value`` that is the same in every process (unlike the salted builtin ``hash``).

    Strings, bytes, ints, floats, bools, None and tuples/lists of them are supported.
    """
    if type(value) is tuple and len(value) == 1 and type(value[0]) is str:  # a one-word key: same bytes
        p = value[0].encode("utf-8", "surrogatepass")
        data = b"t" + (len(p) + 1).to_bytes(4, "big") + b"s" + p
    else:
        data = _hash_bytes(value)
    h = hashlib.blake2b(data, digest_size=8).digest()
    return int.from_bytes(h, "big") & 0x7FFFFFFFFFFFFFFF


def _hash_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return b"s" + value.encode("utf-8", "surrogatepass")
    if isinstance(value, bool):
        return b"b1" if value else b"b0"
    if isinstance(value, int):
        return b"i" + str(value).encode()
    if isinstance(value, float):
        if value.is_integer():
            return b"i" + str(int(value)).encode()
        return b"f" + repr(value).encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return b"y" + bytes(value)
    if value is None:
        return b"n"
    if isinstance(value, (tuple, list)):
        parts = [_hash_bytes(v) for v in value]
        return b"t" + b"".join(len(p).to_bytes(4, "big") + p for p in parts)
    return b"r" + repr(value).encode()


def java_class_name(path: str) -> bool:
    """Whether dotted ``path`` names a Java class (``org.``, ``com.``, ``java.``, ... and no such Python package)."""
    import importlib.util

    if not path.startswith(("org.apache.", "org.", "com.", "java.", "javax.", "io.")):
        return False
    try:
        return importlib.util.find_spec(path.split(".", 1)[0]) is None
    except (ImportError, ValueError):
        return True
