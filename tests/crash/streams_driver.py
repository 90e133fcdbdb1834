"""The Streams crash driver: a windowed operator and stateful bolts in one region (the whole topology).

Every run ends with the final mark (``process_available(final=True)``): one more transaction that
flushes each window task's open window.

The crash tests run it as a separate process and SIGKILL it (``WEIR_CRASH_AT``).

Usage: python streams_driver.py STATE_DIR INPUT_DIR PROVIDER_URL CALL_LOG LABEL [NAME] [...]

Several groups of six (NAME given) run that many copies of the topology side by side in one
SparkSession on ``local[2 * N]`` (the crash barrier of ``WEIR_CRASH_BARRIER``: a copy may hold its
window tasks' slots while it waits at an executor-side point); each copy's run is awaited, and its
final mark sent, in a thread of its own, so a copy armed at its final mark never waits for one
that is held at its own crash point. Each prints ``NAME DONE txid=...``; a single one ``DONE txid=...``.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.streams

from pyspark import cloudpickle  # noqa: E402

import weir  # noqa: E402
from tests.streams import _topology  # noqa: E402

NAME = "crashsw"
WINDOW = 5


def submit(state_dir: str, input_dir: str, url: str, log: str, label: str, name: str, n: int) -> Any:
    """The windowed Streams topology of ``input_dir`` with its state in ``url``, submitted (not started)."""
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": f"local[{2 * n}]",
        "topology.state.provider.config": {"url": url},
        "weir.batch.max.retries": 1,
    }
    topology = _topology.build(input_dir, size=WINDOW, log_path=log, label=label, non_blocking=True)
    return weir.submit(name, conf, topology)


def main() -> int:
    args = sys.argv[1:]
    cloudpickle.register_pickle_by_value(_topology)  # the workers cannot import tests/
    if len(args) <= 6:
        run = submit(*args[:5], args[5] if len(args) > 5 else NAME, 1)
        st = run.process_available(final=True)  # the input is finite: a final mark flushes the open windows
        print(f"DONE txid={st.last_txid} batches={st.batches} skipped={st.skipped}", flush=True)
        return 0
    groups = [args[i : i + 6] for i in range(0, len(args), 6)]
    runs = [(g[5], submit(*g, len(groups)).start(available_now=True, final=True)) for g in groups]

    failed: list[str] = []

    def finish(name: str, run: Any) -> None:
        try:
            run.await_termination()  # Spark's batches, then the final mark
        except BaseException:
            failed.append(name)
            raise
        st = run.status()
        print(f"{name} DONE txid={st.last_txid} batches={st.batches} skipped={st.skipped}", flush=True)

    threads = [threading.Thread(target=finish, args=run, name=f"final-{run[0]}") for run in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
