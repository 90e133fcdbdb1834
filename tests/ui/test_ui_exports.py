"""Pin what ``weir.ui`` exports (change deliberately, here)."""

from __future__ import annotations

import weir.ui


def test_weir_ui_exports() -> None:
    assert sorted(weir.ui.__all__) == ["Snapshot", "StoreReader", "UiServer", "create_app"]
    for name in weir.ui.__all__:
        assert getattr(weir.ui, name).__module__.startswith("weir.ui.")
