"""The class-data-sharing archive the suite's Spark JVMs map (tests/_jvm_cds.py)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests._jvm_cds import QUIET, cds_opts
from tests.conftest import SHORT_JVM_OPTS
from tests.servers import require_binary


def test_the_suite_jvms_get_the_archive_and_a_mismatched_jvm_starts_silently() -> None:
    require_binary("java")
    if os.environ.get("WEIR_TEST_CDS") == "0":
        assert cds_opts(SHORT_JVM_OPTS) == ""
        return
    opts = os.environ["SPARK_SUBMIT_OPTS"]
    assert opts.startswith(SHORT_JVM_OPTS), opts
    m = re.search(r"-XX:SharedArchiveFile=(\S+)", opts)
    assert m is not None, f"SPARK_SUBMIT_OPTS has no CDS archive: {opts!r}"
    assert os.path.getsize(m.group(1)) > 0
    assert QUIET in opts
    assert cds_opts(SHORT_JVM_OPTS) == opts[len(SHORT_JVM_OPTS) :].strip()  # cached: the same archive
    # a JVM whose class path is not the archive's (no Spark jars here) ignores it without a word
    proc = subprocess.run(["java", *opts.split(), "-version"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "cds" not in proc.stderr.lower() and "warning" not in proc.stderr.lower(), proc.stderr


def test_weir_test_cds_0_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEIR_TEST_CDS", "0")
    assert cds_opts(SHORT_JVM_OPTS) == ""
