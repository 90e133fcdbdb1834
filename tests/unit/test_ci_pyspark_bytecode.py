"""`.ci/pyspark_bytecode.py`: a zip of sources gains the bytecode zipimport reads, and nothing else changes."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pyspark_bytecode", ROOT / ".ci" / "pyspark_bytecode.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("pyspark/__init__.py", "VALUE = 41\n")
        z.writestr("pyspark/sub/__init__.py", "")
        z.writestr("pyspark/sub/mod.py", "def f():\n    raise ValueError('from mod')\n")
        z.writestr("pyspark/broken.py", "def (:\n")
        z.writestr("pyspark/data.txt", "not python")


def test_bytecode_is_added_beside_each_module_and_read_by_zipimport(tmp_path: Path) -> None:
    path = tmp_path / "pyspark.zip"
    _zip(path)
    before = {i.filename: zipfile.ZipFile(path).read(i) for i in zipfile.ZipFile(path).infolist()}

    compiled, skipped = _script().add_bytecode(path)

    assert (compiled, skipped) == (3, 1)  # the file that does not compile stays a source, as zipimport has it
    with zipfile.ZipFile(path) as z:
        after = {i.filename: z.read(i) for i in z.infolist()}
    assert {k: after[k] for k in before} == before  # every entry as it was
    assert set(after) - set(before) == {"pyspark/__init__.pyc", "pyspark/sub/__init__.pyc", "pyspark/sub/mod.pyc"}

    code = (
        "import pyspark, pyspark.sub.mod as m, traceback\n"
        "print(pyspark.VALUE + 1, pyspark.__file__.endswith('__init__.pyc'), m.__file__.endswith('mod.pyc'))\n"
        "try:\n    m.f()\nexcept ValueError:\n    print(traceback.format_exc().strip().splitlines()[-2].strip())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(path)}, cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "42 True True"  # imported from the bytecode
    assert lines[1] == "raise ValueError('from mod')"  # tracebacks still show the zip's source


def test_a_zip_that_has_the_bytecode_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "pyspark.zip"
    _zip(path)
    script = _script()
    script.add_bytecode(path)
    stamp = path.stat().st_mtime_ns, path.read_bytes()

    assert script.add_bytecode(path) == (0, 0)
    assert (path.stat().st_mtime_ns, path.read_bytes()) == stamp
