"""The runnable examples in ``examples/`` run and print what their docs say (driver mode, no
broker; ``make run`` covers the quickstart's Kafka → Kafka path)."""

from __future__ import annotations

import os
import runpy
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.spark

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def run_example(name: str, capsys: Any, argv: list[str] | None = None) -> list[str]:
    """Run ``examples/<name>`` as ``__main__`` and return its stdout lines, stripped."""
    saved = sys.argv
    sys.argv = [name, *(argv or [])]
    try:
        runpy.run_path(os.path.join(EXAMPLES, name), run_name="__main__")
    finally:
        sys.argv = saved
    return [line.strip() for line in capsys.readouterr().out.splitlines()]


class TestExamples:
    def test_quickstart_driver(self, spark: Any, capsys: Any) -> None:
        """The README's table: one count update per paid order."""
        lines = run_example("quickstart.py", capsys, ["--driver"])
        i = lines.index("customer   paid orders timestamp")
        assert [" ".join(line.split()) for line in lines[i + 1:i + 5]] == [
            "alice 1 1000", "bob 1 2000", "alice 2 4000", "bob 2 5000",
        ]

    @pytest.mark.usefixtures("operator")
    def test_clickstream_sessions(self, spark: Any, capsys: Any) -> None:
        """Sessions emitted on close, in (end, start) order; one late click dropped."""
        lines = [" ".join(line.split()) for line in run_example("clickstream_sessions.py", capsys)]
        i = lines.index("user start end clicks")
        assert lines[i + 1:i + 4] == ["bob 09:01:00 09:03:00 2", "alice 09:00:00 09:08:00 4", "bob 09:11:00 09:11:00 1"]
        assert "dropped-records-total: 1" in lines
        assert "emit-final-records-total: 3" in lines

    def test_order_enrichment_driver(self, spark: Any, capsys: Any) -> None:
        """The README's tables: c3's order dropped, Ann's scones joined with her updated region,
        one final revenue record per closed window with its latest order's timestamp (the 09:02
        window stays open)."""
        lines = [" ".join(line.split()) for line in run_example("order_enrichment.py", capsys, ["--driver"])]
        i = lines.index("customer item amount name region time")
        assert lines[i + 1:i + 8] == [
            "c1 tea 3 Ann EU 09:00:10",
            "c2 cake 5 Bo US 09:00:20",
            "c1 scones 7 Ann US 09:00:50",
            "c2 tea 2 Bo US 09:01:10",
            "c1 cake 6 Ann US 09:02:05",
            "",
            "region start end orders revenue time",
        ]
        assert lines[i + 8:] == [
            "EU 09:00:00 09:01:00 1 3 09:00:10",
            "US 09:00:00 09:01:00 2 12 09:00:50",
            "US 09:01:00 09:02:00 1 2 09:01:10",
        ]

    def test_customer_cogroup(self, spark: Any, capsys: Any) -> None:
        """The KIP-150 customers, exactly as the KIP lists them."""
        lines = run_example("customer_cogroup.py", capsys)
        assert "customer 1: {'cart': [1, 3, 4], 'purchases': [7, 8], 'wish_list': [11]}" in lines
        assert "customer 2: {'cart': [2, 5], 'purchases': [6, 9, 10], 'wish_list': [12, 13, 14, 15]}" in lines

    def test_orders_by_customer(self, spark: Any, capsys: Any) -> None:
        """The foreign-key join's orders: a customer update reaches each of her orders, a moved
        order retracts its old match (the left join's two records), a deleted order two tombstones."""
        lines = [" ".join(line.split()) for line in run_example("orders_by_customer.py", capsys)]
        i = lines.index("order item name time")
        assert lines[i + 1:] == ["o1 tea Ann 2", "o2 cake Ann 3", "o3 jam None 4", "o1 tea Anna 5", "o2 cake Anna 5",
                                 "o2 cake None 6", "o2 cake None 6", "o2 cake Bo 7", "o3 jam Bo 7", "o1 - - 8",
                                 "o1 - - 8"]

    @pytest.mark.usefixtures("operator")
    def test_tumbling_counts(self, spark: Any, capsys: Any) -> None:
        """Per-minute view counts with both emit strategies; alice's 09:00:50 view is dropped."""
        lines = [" ".join(line.split()) for line in run_example("tumbling_counts.py", capsys)]
        assert "alice 09:00:00 09:01:00 2 09:00:40" in lines
        assert "bob 09:00:00 09:01:00 2 09:00:58" in lines
        assert "carol 09:02:00 09:03:00 1 09:02:15" in lines
        assert lines.count("dropped-records-total: 1") == 2

    def test_quiet_sensors(self, spark: Any, capsys: Any) -> None:
        """The Processor API example: one alert per sensor quiet for a minute of stream time,
        timestamped with the punctuation that found it."""
        lines = run_example("quiet_sensors.py", capsys)
        assert "Processor: quiet-sensors (stores: [last-seen])" in lines
        assert lines[-2:] == ["100 s  boiler: quiet since 30 s", "170 s  pump: quiet since 100 s"]

    def test_idle_windows(self, capsys: Any) -> None:
        """Idle close: nothing while home keeps the aggregation busy (about's window stays open, and
        a view within its grace is taken), every open window after five quiet minutes, then a
        record for a closed window is late."""
        lines = [" ".join(line.split()) for line in run_example("idle_windows.py", capsys)]
        assert lines == ["about quiet for 6 minutes, home 2 minutes ago:", "five quiet minutes later:",
                         "about 00:00 2 (timestamp 55000)", "home 00:00 2 (timestamp 50000)",
                         "home 01:00 1 (timestamp 65000)", "dropped-records-total: 1"]

    def test_backfill_over_parquet(self, spark: Any, capsys: Any) -> None:
        """The Backfill page's example: typed rows of a Parquet table, in timestamp order (the
        10:59 order stored after the 11:05 one still counts in its hour), each closed hour once;
        alice's 12:00 hour is still open at the end of the history."""
        lines = [" ".join(line.split()) for line in run_example("backfill.py", capsys)]
        i = lines.index("customer@hour orders written at")
        assert lines[i + 1:] == ["alice@10:00 3 10:59", "bob@10:00 1 10:20", "bob@11:00 1 11:05"]
