"""First contact: the README's commands, the demo and the examples work as written.

Each test runs ``weir`` (or an example script) as a child process, as a new user would. Errors a
user can make before Spark starts (a misspelled provider, an unreachable store, a broken topology
file) are reported in one ``weir: error:`` line, exit code 2, without starting the JVM. Ctrl-C is a
real SIGINT to the child's process group, as a terminal sends it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.servers import free_port, wait_until
from weir.demo import SENTENCES, read_counts

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SRC = ROOT / "src"
JVM_BANNER = "jdk.incubator"  # the JVM's first words on stderr: Spark was started


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("WEIR_STATE_DIR", None)
    env.pop("WORDCOUNT_INPUT", None)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra or {})
    return env


def weir_cmd(*args: str, cwd: Path, timeout: float = 600, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "weir", *args], cwd=cwd, env=_env(env), capture_output=True, text=True, timeout=timeout
    )


def sample_counts() -> Counter[str]:
    c: Counter[str] = Counter()
    for f in range(3):
        for i in range(20):
            c.update(SENTENCES[(f + i) % len(SENTENCES)].split())
    return c


def error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.strip()]


# ---- the demo --------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.spark
def test_demo_resets_only_its_own_namespaces(tmp_path: Path) -> None:
    from weir.state import StateFactory

    conf = {"weir.state.dir": str(tmp_path / "weir-state")}
    provider: Any = StateFactory.get_provider(conf)
    mine = provider.new_state("wordcount-mine-count-0", conf)  # the user's own topology, named like the example
    mine.put("hello", 41)
    mine.prepare_commit(1)
    mine.commit(1)
    stale = provider.new_state("weir-demo-count-0", conf)  # a previous demo run
    stale.put("zzz-stale", 1)
    stale.prepare_commit(1)
    stale.commit(1)
    from weir.state.factory import close_backends

    close_backends()
    res = weir_cmd("demo", "--words", "3000", "--distinct", "60", "--files", "2", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "reset the previous demo run (dropped weir-demo-count-0; nothing else is touched)" in res.stdout
    assert "verified: all" in res.stdout
    assert "the first batch waits a few seconds" in res.stdout
    final = [ln for ln in res.stderr.splitlines() if ln.startswith("[stopped]")]
    assert final and " words 3k " in final[-1], res.stderr  # the live status counts words, not lines
    assert "txid None" not in res.stdout + res.stderr
    assert "WARN" not in res.stderr and "Setting default log level" not in res.stderr
    provider = StateFactory.get_provider(conf)
    assert dict(provider.new_state("wordcount-mine-count-0", conf)) == {"hello": 41}
    assert "zzz-stale" not in dict(provider.new_state("weir-demo-count-0", conf))
    close_backends()


# ---- the examples, as documented ---------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.spark
def test_readme_wordcount_command_then_a_clashing_name_is_one_line(tmp_path: Path) -> None:
    # `weir run examples/wordcount.py --available-now` on a fresh checkout: no ./input, a sample is used
    res = weir_cmd("run", str(EXAMPLES / "wordcount.py"), "--available-now", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "wrote a sample to" in res.stderr
    assert "last txid 2, 2 batches, 60 tuples from spouts" in res.stdout
    assert read_counts({"weir.state.dir": str(tmp_path / "weir-state")}, "wordcount") == sample_counts()
    # another topology under the same name: refused at submit with a hint, not a Java stack trace
    clash = weir_cmd(
        "run", str(EXAMPLES / "trident_wordcount.py"), "--available-now", "--name", "wordcount", cwd=tmp_path
    )
    assert clash.returncode == 2
    lines = [ln for ln in error_lines(clash.stderr) if "wrote a sample" not in ln]
    assert len(lines) == 1 and lines[0].startswith("weir: error: topology 'wordcount': Spark's checkpoint"), lines
    assert "--name" in lines[0]


@pytest.mark.slow
@pytest.mark.spark
def test_trident_example_honours_conf_input(tmp_path: Path) -> None:
    inp = tmp_path / "my-text"
    inp.mkdir()
    (inp / "a.txt").write_text("to be or not to be\n")
    res = weir_cmd(
        "run", str(EXAMPLES / "trident_wordcount.py"), "--available-now", f"--conf=input={inp}", cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "wrote a sample" not in res.stderr
    import sqlite3

    with sqlite3.connect(tmp_path / "weir-state" / "trident.db") as conn:
        rows = {json.loads(k)[0]: json.loads(v)[1] for k, v in conn.execute("SELECT k, v FROM word_counts")}
    assert rows == dict(Counter("to be or not to be".split()))


@pytest.mark.slow
@pytest.mark.spark
def test_redis_wordcount_script_as_its_header_says(tmp_path: Path, redis_server: Any) -> None:
    redis_server.flushall()
    inp = tmp_path / "my-text-dir"
    inp.mkdir()
    (inp / "a.txt").write_text("the cow jumped over the moon\n")
    res = subprocess.run(
        [sys.executable, str(EXAMPLES / "redis_wordcount.py"), str(inp), redis_server.url],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert "No module named" not in res.stderr
    assert "committed txid 1" in res.stdout
    assert "[stopped]" in res.stderr  # the script shows progress
    got: Counter[str] = Counter()
    for task in range(2):
        flat = redis_server.command_reply("HGETALL", f"wordcount-redis-count-{task}")
        got.update({_text(k): int(_text(v)) for k, v in _pairs(flat).items()})
    assert got == Counter("the cow jumped over the moon".split())


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _pairs(flat: list[Any]) -> dict[Any, Any]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


# ---- errors before Spark starts ----------------------------------------------------------------
def test_misspelled_provider_is_one_line_before_spark(tmp_path: Path) -> None:
    res = weir_cmd(
        "run", str(EXAMPLES / "wordcount.py"), "--available-now", "--conf", "topology.state.provider=sqlitee",
        cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert res.returncode == 2
    lines = error_lines(res.stderr)
    assert lines[-1].startswith("weir: error: topology.state.provider: unknown provider 'sqlitee'"), lines
    assert JVM_BANNER not in res.stderr  # reported before the JVM was started


def test_unreachable_store_is_one_line_before_spark(tmp_path: Path) -> None:
    port = free_port()
    res = weir_cmd(
        "run", str(EXAMPLES / "redis_wordcount.py"), "--available-now",
        "--conf", f'topology.state.provider.config={{"url": "redis://127.0.0.1:{port}/0"}}',
        cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert res.returncode == 2
    lines = [ln for ln in error_lines(res.stderr) if "wrote a sample" not in ln]
    assert len(lines) == 1 and lines[0].startswith("weir: error:") and f"127.0.0.1:{port}" in lines[0], lines
    assert JVM_BANNER not in res.stderr


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def topology(:\n    pass\n", r"broken\.py:1: SyntaxError"),
        ("import no_such_module_for_weir\n", r"broken\.py:1: ModuleNotFoundError: No module named 'no_such_m"),
        ("x = 1\nraise RuntimeError('boom')\n", r"broken\.py:2: RuntimeError: boom"),
    ],
)
def test_broken_topology_file_is_one_error_line_exit_2(tmp_path: Path, source: str, expected: str) -> None:
    import re

    (tmp_path / "broken.py").write_text(source)
    res = weir_cmd("run", str(tmp_path / "broken.py"), cwd=tmp_path, timeout=120)
    assert res.returncode == 2
    lines = error_lines(res.stderr)
    assert len(lines) == 1 and lines[0].startswith("weir: error: weir run: "), lines
    assert re.search(expected, lines[0]), lines


# ---- Ctrl-C ----------------------------------------------------------------------------------
def _session_processes(sid: int) -> list[str]:
    out = subprocess.run(["ps", "-e", "-o", "sid=,pid=,args="], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if ln.split(None, 1)[0] == str(sid)]


def _start_weir(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "weir", *args], cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,  # a process group of its own, like a terminal's foreground job
    )  # fmt: skip


def _left_after(sid: int, timeout: float) -> list[str]:
    """The processes of session ``sid`` still there after up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    left = _session_processes(sid)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _session_processes(sid)
    return left


def _kill_session(proc: subprocess.Popen[str]) -> None:
    """Whatever a failed test left: the child and anything in its process group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait()


def _ctrl_c_and_wait(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


@pytest.mark.slow
@pytest.mark.spark
def test_ctrl_c_stops_at_a_batch_boundary_exit_130_no_jvm_left(tmp_path: Path) -> None:
    from weir.checkpoint.coordinator import CheckpointStore
    from weir.state import StateFactory

    inp = tmp_path / "input"
    inp.mkdir()
    for f in range(3):
        (inp / f"part-{f}.txt").write_text("alpha beta gamma\n" * 50)
    proc = _start_weir(["run", str(EXAMPLES / "wordcount.py"), "--conf", f"input={inp}"], tmp_path)
    conf = {"weir.state.dir": str(tmp_path / "weir-state")}
    try:

        def committed() -> int:
            if not (tmp_path / "weir-state" / "state.db").exists():
                return 0
            rec = CheckpointStore(StateFactory.get_provider(conf).backend, "wordcount").load()  # type: ignore[attr-defined]
            return 0 if rec is None else rec.last_committed

        wait_until(lambda: committed() >= 1, timeout=400, what="a committed batch")
        time.sleep(1)
        code, out, err = _ctrl_c_and_wait(proc)
        left = _left_after(proc.pid, 60)  # checked before the clean-up below kills leftovers
    finally:
        _kill_session(proc)
    assert not left, left
    assert code == 130, err[-3000:]
    assert "Traceback" not in err and "Exception" not in err, err[-3000:]
    assert sum("interrupted" in ln for ln in err.splitlines()) == 1, err
    import re

    m = re.search(r"last txid (\d+), (\d+) batches, (\d+) tuples from spouts", out)
    assert m, out
    txid, batches, lines = (int(g) for g in m.groups())
    assert txid >= 1 and batches == txid, out  # every batch committed once: none failed or was retried
    assert "retries" not in err
    rec = CheckpointStore(StateFactory.get_provider(conf).backend, "wordcount").load()  # type: ignore[attr-defined]
    assert rec is not None and rec.phase.value == "COMMITTED" and rec.txid == txid  # stopped at a boundary
    assert read_counts(conf, "wordcount") == Counter({"alpha": lines, "beta": lines, "gamma": lines})


@pytest.mark.slow
@pytest.mark.spark
def test_ctrl_c_during_spark_start_up_leaves_no_jvm(tmp_path: Path) -> None:
    proc = _start_weir(["run", str(EXAMPLES / "wordcount.py"), "--available-now"], tmp_path)
    try:
        wait_until(
            lambda: any("java" in ln for ln in _session_processes(proc.pid)), timeout=120, what="the JVM to start"
        )
        code, _out, err = _ctrl_c_and_wait(proc)
        left = _left_after(proc.pid, 60)
    finally:
        _kill_session(proc)
    assert code == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert not left, left  # no JVM outlives the interrupted command
