"""PySpark's per-task ``importlib.invalidate_caches()`` leaves Spark's own archives' directories alone.

Importing :mod:`weir.runtime.spark.executor` (every weir function on a worker does) makes the
``zipimporter`` of ``<SPARK_HOME>/python/lib/pyspark.zip``, py4j's source zip and Spark's
``spark-core`` jar keep the directory it read; any other archive is re-read as before.
"""

from __future__ import annotations

import importlib
import sys
import zipfile
import zipimport
from collections.abc import Iterator
from pathlib import Path

import pytest

import weir.runtime.spark.executor  # noqa: F401 - installs the behaviour under test


def _zip(path: Path, modules: dict[str, str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        for name, text in modules.items():
            z.writestr(f"{name}.py", text)
    return path


@pytest.fixture
def importers() -> Iterator[list[zipimport.zipimporter]]:
    made: list[zipimport.zipimporter] = []
    yield made
    for imp in made:
        sys.path_importer_cache.pop(imp.archive, None)


@pytest.mark.parametrize(
    ("where", "kept"),
    [
        ("spark/python/lib/pyspark.zip", True),
        ("spark/python/lib/py4j-0.10.9.9-src.zip", True),
        ("spark/jars/spark-core_2.13-4.3.0.jar", True),
        ("user/lib/mine.zip", False),  # a user's archive (sc.addPyFile) is re-read
        ("user/jars/other.jar", False),
        ("user/stuff/pyspark.zip", False),  # the name alone is not enough
    ],
)
def test_only_sparks_own_archives_keep_their_directory(
    tmp_path: Path, importers: list[zipimport.zipimporter], where: str, kept: bool
) -> None:
    archive = _zip(tmp_path / where, {"first_mod": "X = 1\n"})
    imp = zipimport.zipimporter(str(archive))
    importers.append(imp)
    assert imp.find_spec("first_mod") is not None
    _zip(archive, {"first_mod": "X = 1\n", "added_mod": "Y = 2\n"})  # the archive changes under it
    imp.invalidate_caches()
    assert (imp.find_spec("added_mod") is None) is kept


def test_importlib_invalidate_caches_goes_through_the_same_rule(
    tmp_path: Path, importers: list[zipimport.zipimporter]
) -> None:
    spark = _zip(tmp_path / "spark/python/lib/pyspark.zip", {"a_mod": ""})
    user = _zip(tmp_path / "user/mods.zip", {"b_mod": ""})
    for archive in (spark, user):
        imp = zipimport.zipimporter(str(archive))
        sys.path_importer_cache[str(archive)] = imp
        importers.append(imp)
    _zip(spark, {"a_mod": "", "a_new": ""})
    _zip(user, {"b_mod": "", "b_new": ""})
    importlib.invalidate_caches()
    assert sys.path_importer_cache[str(spark)].find_spec("a_new") is None
    assert sys.path_importer_cache[str(user)].find_spec("b_new") is not None


def test_installing_twice_wraps_once() -> None:
    first = zipimport.zipimporter.invalidate_caches
    weir.runtime.spark.executor._keep_spark_zip_directories()
    assert zipimport.zipimporter.invalidate_caches is first
