"""Configuration from files and the environment, so passwords need not appear on the command line.

* ``--conf-file FILE``: a JSON object of configuration keys (``{"topology.state.provider": "redis",
  ...}``); repeatable, later files override earlier ones.
* ``${NAME}`` in any string value (from the module's ``CONF``, a conf file, ``--conf`` or ``--url``) is
  replaced by the environment variable ``NAME`` when the command starts; ``$${`` is a literal ``${``.
  A variable that is not set is an error naming it. Example: ``--conf-file prod.json`` holding
  ``{"topology.state.provider.config": {"url": "redis://:${REDIS_PASSWORD}@cache:6379/0"}}``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from weir.errors import ConfigError

__all__ = ["expand_env", "read_conf_file"]

_VAR = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def read_conf_file(path: str, *, option: str = "--conf-file") -> dict[str, Any]:
    """The JSON object in ``path`` (a :class:`ConfigError` naming the file when it is not one)."""
    try:
        with open(path, encoding="utf-8") as fh:
            loaded = json.load(fh)
    except OSError as exc:
        msg = f"{option} {path!r} cannot be read: {exc.strerror}"
        raise ConfigError(msg) from exc
    except ValueError as exc:
        # the position only: the message of the JSON error could quote a secret
        where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        msg = f"{option} {path!r} is not valid JSON{where}"
        raise ConfigError(msg) from None
    if not isinstance(loaded, dict):
        msg = f"{option} {path!r} must hold a JSON object of configuration keys"
        raise ConfigError(msg)
    return loaded


def expand_env(obj: Any, *, environ: Mapping[str, str] | None = None, where: str = "") -> Any:
    """``obj`` with ``${NAME}`` in every string replaced by the environment variable ``NAME``."""
    env = os.environ if environ is None else environ
    if isinstance(obj, str):

        def sub(m: re.Match[str]) -> str:
            if m.group(0) == "$${":
                return "${"
            name = m.group(1)
            if name not in env:
                msg = (
                    f"configuration {where or 'value'} uses ${{{name}}}, but the environment variable {name} is not set"
                )
                raise ConfigError(msg)
            return env[name]

        return _VAR.sub(sub, obj)
    if isinstance(obj, Mapping):
        return {k: expand_env(v, environ=env, where=str(k)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [expand_env(v, environ=env, where=where) for v in obj]
    return obj
