"""Run batches of a pickled map-state factory in a fresh process (used by the tests).

``python -m tests.contract.trident._child SPEC_JSON`` where the spec is
``{"factory": PICKLE_PATH, "partition": p, "partitions": n, "batches": [[txid, [[*key, n], ...]], ...]}``;
each batch makes a new state, runs ``begin_commit`` / one ``multi_update`` of sums / ``commit``.
Prints the JSON list of every batch's ``multi_update`` result.
"""

from __future__ import annotations

import json
import pickle
import sys

from weir.trident.state import CombinerValueUpdater


class Sum:
    def combine(self, a: int, b: int) -> int:
        return a + b


def main() -> None:
    spec = json.loads(sys.argv[1])
    with open(spec["factory"], "rb") as f:
        factory = pickle.load(f)
    out = []
    for txid, rows in spec["batches"]:
        state = factory.make_state({}, spec["partition"], spec["partitions"])
        state.begin_commit(txid)
        keys = [row[:-1] for row in rows]
        out.append(state.multi_update(keys, [CombinerValueUpdater(Sum(), row[-1]) for row in rows]))
        state.commit(txid)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
