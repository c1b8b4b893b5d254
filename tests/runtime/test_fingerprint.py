"""The fingerprint of a topology's stateful part, its diff, and the check at start (pure Python)."""

from __future__ import annotations

import json
import operator
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from streamsdsl.compiler.jvm_operator import Backend, OperatorChoice
from streamsdsl import Aggregations, EmitStrategy, Serdes, SessionWindows, SlidingWindows, StreamsBuilder, TimeWindows
from streamsdsl.dsl.options import Grouped
from streamsdsl.errors import StreamsDslError
from streamsdsl.ir.topology import Topology
from streamsdsl.runtime.checkpoint import FINGERPRINT_FILE, check_topology
from streamsdsl.runtime.config import StreamsConfigError
from streamsdsl.runtime.errors import TopologyChangedError
from streamsdsl.runtime.fingerprint import Fingerprint, diff, function_identity, topology_fingerprint

AGG = "KSTREAM-AGGREGATE-0000000002"
COUNT = f"{AGG} (count)"
REDUCE = "KSTREAM-REDUCE-0000000002 (reduce)"


def count_app(
    *,
    windows: Any = None,
    emit: EmitStrategy | None = None,
    before: Callable[[Any], Any] = lambda s: s,
    group: Callable[[Any], Any] = lambda s: s.group_by_key(),
    agg: Callable[[Any], Any] = lambda g: g.count(),
    after: Callable[[Any], Any] = lambda s: s,
    extra: Callable[[StreamsBuilder], None] | None = None,
) -> Topology:
    """``stream("in") | before | group | [windowed_by] | agg | to_stream | after | to("out")``."""
    b = StreamsBuilder()
    grouped = group(before(b.stream("in")))
    if windows is not None:
        grouped = grouped.windowed_by(windows)
        if emit is not None:
            grouped = grouped.emit_strategy(emit)
    after(agg(grouped).to_stream()).to("out")
    if extra is not None:
        extra(b)
    return b.build()


def changes(old: Topology, new: Topology) -> list[str]:
    return [str(c) for c in diff(topology_fingerprint(old), topology_fingerprint(new))]


def first_line(old: Topology, new: Topology, tmp_path: Path) -> str:
    """The first line of the error `check_topology` raises for a checkpoint written by ``old``."""
    cp = tmp_path / "cp"
    (cp / "commits").mkdir(parents=True)
    (cp / "commits" / "0").write_text("v1\n")
    check_topology(str(cp), topology_fingerprint(old), application_id="wc", state_dir=str(tmp_path))
    with pytest.raises(TopologyChangedError) as info:
        check_topology(str(cp), topology_fingerprint(new), application_id="wc", state_dir=str(tmp_path))
    return str(info.value).splitlines()[0]


def _headline(change: str) -> str:
    return ("the topology of application.id 'wc' changed its stateful part since its checkpoint was written: "
            f"{change}.")


def key_of_user(key: Any, value: Any) -> Any:
    return value["user"]


def key_of_region(key: Any, value: Any) -> Any:
    return value["region"]


class TestAccepted:
    def test_same_topology_twice(self) -> None:
        """Building the same topology again gives an equal fingerprint (lambdas included)."""
        build = lambda: count_app(group=lambda s: s.group_by(lambda k, v: v["user"]))  # noqa: E731
        assert topology_fingerprint(build()) == topology_fingerprint(build())
        assert changes(build(), build()) == []

    def test_stateless_change_before_the_aggregation(self) -> None:
        """A filter and a value mapper added before the count shift the generated names but are
        accepted: names are not compared, Spark matches state by position."""
        new = count_app(before=lambda s: s.filter(lambda k, v: v is not None).map_values(lambda v: v))
        assert topology_fingerprint(new).operators[0]["name"] == "KSTREAM-AGGREGATE-0000000004"
        assert changes(count_app(), new) == []

    def test_mapper_after_the_aggregation(self) -> None:
        """A changed lambda body, or a new key selector, after the last stateful operator is accepted."""
        old = count_app(after=lambda s: s.map_values(lambda v: v + 1))
        new = count_app(after=lambda s: s.map_values(lambda v: v * 2).select_key(lambda k, v: v))
        assert changes(old, new) == []

    def test_changed_aggregator_body(self) -> None:
        """An aggregator's body is not part of the fingerprint (as in Kafka Streams)."""
        old = count_app(agg=lambda g: g.aggregate(lambda: 0, lambda k, v, a: a + 1))
        new = count_app(agg=lambda g: g.aggregate(lambda: 0, lambda k, v, a: a + len(v)))
        assert changes(old, new) == []

    def test_renamed_key_selector_with_the_same_body(self) -> None:
        """A key selector is identified by its code, not its name."""
        def user_of(key: Any, value: Any) -> Any:
            return value["user"]

        old = count_app(group=lambda s: s.group_by(key_of_user))
        assert changes(old, count_app(group=lambda s: s.group_by(user_of))) == []

    def test_legacy_checkpoint_without_fingerprint(self, tmp_path: Path) -> None:
        """A checkpoint with progress but no fingerprint (written before this check) is accepted
        and gets one."""
        cp = tmp_path / "cp"
        (cp / "offsets").mkdir(parents=True)
        (cp / "offsets" / "0").write_text("v1\n")
        check_topology(str(cp), topology_fingerprint(count_app()), application_id="wc", state_dir=str(tmp_path))
        stored = json.loads((cp / FINGERPRINT_FILE).read_text())
        assert stored["format"] == 1 and [o["kind"] for o in stored["stateful_operators"]] == ["count"]

    def test_checkpoint_without_progress_is_overwritten(self, tmp_path: Path) -> None:
        """A fingerprint beside a checkpoint that never ran a batch is replaced, not compared."""
        cp = tmp_path / "cp"
        check_topology(str(cp), topology_fingerprint(count_app()), application_id="wc", state_dir=str(tmp_path))
        windowed = count_app(windows=TimeWindows.of_size_with_no_grace(10))
        check_topology(str(cp), topology_fingerprint(windowed), application_id="wc", state_dir=str(tmp_path))
        stored = json.loads((cp / FINGERPRINT_FILE).read_text())
        assert stored["stateful_operators"][0]["windows"] == "TimeWindows(size=10ms, advance=10ms, grace=0ms)"

    def test_stateless_change_updates_the_stored_fingerprint(self, tmp_path: Path) -> None:
        """An accepted change is written: the stored names follow the new topology."""
        cp = tmp_path / "cp"
        (cp / "commits").mkdir(parents=True)
        (cp / "commits" / "0").write_text("v1\n")
        check_topology(str(cp), topology_fingerprint(count_app()), application_id="wc", state_dir=str(tmp_path))
        new = count_app(before=lambda s: s.filter(lambda k, v: True))
        check_topology(str(cp), topology_fingerprint(new), application_id="wc", state_dir=str(tmp_path))
        stored = json.loads((cp / FINGERPRINT_FILE).read_text())
        assert stored["stateful_operators"][0]["name"] == "KSTREAM-AGGREGATE-0000000003"

    def test_other_python_compares_function_names(self) -> None:
        """Bytecode differs between Python versions: then key functions are compared by name."""
        old = topology_fingerprint(count_app(group=lambda s: s.group_by(key_of_user)))
        stored = Fingerprint.from_json({**old.to_json(), "python": "3.10"})
        for op in stored.operators:
            op["key"][0][-1]["fn"]["code"] = "0000000000000000"
        assert diff(stored, old) == []
        other = topology_fingerprint(count_app(group=lambda s: s.group_by(key_of_region)))
        assert [c.what for c in diff(stored, other)] == ["key"]


class TestRejected:
    def test_added_window(self, tmp_path: Path) -> None:
        """count() → windowed count(): the windows changed."""
        new = count_app(windows=TimeWindows.of_size_with_no_grace(60_000))
        assert first_line(count_app(), new, tmp_path) == _headline(
            f"{COUNT}: windows none -> TimeWindows(size=60000ms, advance=60000ms, grace=0ms)")

    @pytest.mark.parametrize("old, new, text", [
        (TimeWindows.of_size_with_no_grace(10), TimeWindows.of_size_with_no_grace(20),
         "TimeWindows(size=10ms, advance=10ms, grace=0ms) -> TimeWindows(size=20ms, advance=20ms, grace=0ms)"),
        (TimeWindows.of_size_with_no_grace(10), TimeWindows.of_size_and_grace(10, 5),
         "TimeWindows(size=10ms, advance=10ms, grace=0ms) -> TimeWindows(size=10ms, advance=10ms, grace=5ms)"),
        (SessionWindows.of_inactivity_gap_with_no_grace(5), SessionWindows.of_inactivity_gap_with_no_grace(7),
         "SessionWindows(gap=5ms, grace=0ms) -> SessionWindows(gap=7ms, grace=0ms)"),
        (SlidingWindows.of_time_difference_with_no_grace(5), TimeWindows.of_size_with_no_grace(5),
         "SlidingWindows(time_difference=5ms, grace=0ms) -> TimeWindows(size=5ms, advance=5ms, grace=0ms)"),
    ], ids=["size", "grace", "gap", "sliding-to-tumbling"])
    def test_changed_window(self, tmp_path: Path, old: Any, new: Any, text: str) -> None:
        """A window's size, grace, gap or type is part of the state's layout."""
        assert first_line(count_app(windows=old), count_app(windows=new), tmp_path) == _headline(
            f"{COUNT}: windows {text}")

    def test_changed_emit_strategy(self, tmp_path: Path) -> None:
        """on_window_update() → on_window_close()."""
        w = SessionWindows.of_inactivity_gap_with_no_grace(5)
        old, new = count_app(windows=w), count_app(windows=w, emit=EmitStrategy.on_window_close())
        assert first_line(old, new, tmp_path) == _headline(
            f"{COUNT}: emit strategy EmitStrategy.on_window_update() -> EmitStrategy.on_window_close()")

    def test_changed_aggregation_kind(self, tmp_path: Path) -> None:
        """count() → reduce()."""
        new = count_app(agg=lambda g: g.reduce(operator.add))
        assert first_line(count_app(), new, tmp_path) == _headline(f"{REDUCE}: aggregation count -> reduce")

    def test_table_made_versioned(self) -> None:
        """A table source (and the stream–table join reading it) materialized with a versioned
        store keeps versions in its state: a checkpoint of the latest-value table cannot
        continue as it, nor the other way round; a grace period changes the join's state too."""
        from streamsdsl import Joined, Materialized, Stores

        def app(versioned: bool, grace: int | None = None) -> Topology:
            b = StreamsBuilder()
            store = Materialized.as_(Stores.persistent_versioned_key_value_store("t", 10) if versioned else "t")
            joined = None if grace is None else Joined.with_grace_period(grace)
            b.stream("s").join(b.table("tt", materialized=store), lambda v, t: v, joined=joined).to("out")
            return b.build()

        assert changes(app(False), app(True)) == [
            "KTABLE-SOURCE-0000000002 (TableSourceNode (versioned)): aggregation TableSourceNode -> TableSourceNode "
            "(versioned)",
            "KSTREAM-JOIN-0000000003 (StreamTableJoinNode (versioned)): aggregation StreamTableJoinNode -> "
            "StreamTableJoinNode (versioned)",
        ]
        assert changes(app(True), app(True, 5)) == [
            "KSTREAM-JOIN-0000000003 (StreamTableJoinNode (versioned, grace)): aggregation StreamTableJoinNode "
            "(versioned) -> StreamTableJoinNode (versioned, grace)"]
        assert changes(app(True, 5), app(True, 5)) == []

    def test_added_aggregation(self, tmp_path: Path) -> None:
        """A second count, over another topic: the new operator is named first, then the new source."""
        new = count_app(extra=lambda b: b.stream("more").group_by_key().count().to_stream().to("out2"))
        assert first_line(count_app(), new, tmp_path) == _headline(
            "KSTREAM-AGGREGATE-0000000007 (count): added (and 1 more change(s), listed below)")
        assert changes(count_app(), new)[1] == "the topology: sources 1 ([in]) -> 2 ([in], [more])"

    def test_added_aggregation_of_the_same_source(self) -> None:
        """A second aggregation branching off the same stream."""
        new = count_app(before=lambda s: s.peek(lambda k, v: None),
                        extra=lambda b: b.stream("in2").to("x"))
        assert changes(count_app(), new) == ["the topology: sources 1 ([in]) -> 2 ([in], [in2])"]
        b = StreamsBuilder()
        s = b.stream("in")
        s.group_by_key().count().to_stream().to("out")
        s.group_by_key().reduce(operator.add).to_stream().to("out2")
        assert changes(count_app(), b.build()) == ["KSTREAM-REDUCE-0000000006 (reduce): added"]

    def test_merged_stream_keyed_alike_is_accepted(self) -> None:
        """Merging another stream into a count, keyed as read like the first, is no re-keying
        (but a second source is a change of its own)."""
        b = StreamsBuilder()
        b.stream("in").merge(b.stream("in2").filter(lambda k, v: True)).group_by_key().count().to_stream().to("out")
        assert changes(count_app(), b.build()) == ["the topology: sources 1 ([in]) -> 2 ([in], [in2])"]

    def test_merged_stream_rekeyed(self) -> None:
        """A merged stream whose keys come from a selector re-keys the aggregation."""
        b = StreamsBuilder()
        b.stream("in").merge(b.stream("in2").select_key(key_of_user)).group_by_key().count().to_stream().to("out")
        found = changes(count_app(), b.build())
        assert found[0].startswith("KSTREAM-AGGREGATE-0000000005 (count): key [the source key] -> [merge([the "
                                   f"source key, select_key({__name__}.key_of_user #")
        assert found[0].endswith(")] | [the source key])]")
        assert found[1:] == ["the topology: sources 1 ([in]) -> 2 ([in], [in2])"]

    def test_removed_aggregation(self, tmp_path: Path) -> None:
        """The old operator is named; the stateless remainder does not matter."""
        b = StreamsBuilder()
        b.stream("in").to("out")
        assert first_line(count_app(), b.build(), tmp_path) == _headline(f"{COUNT}: removed")

    def test_removed_first_of_two_aggregations(self) -> None:
        """Aligning by what the operators are finds which of two was removed."""
        windowed = lambda b: b.stream("more").group_by_key().windowed_by(  # noqa: E731
            TimeWindows.of_size_with_no_grace(5)).count().to_stream().to("out2")
        b = StreamsBuilder()
        windowed(b)
        assert changes(count_app(extra=windowed), b.build()) == [
            f"{COUNT}: removed", "the topology: sources 2 ([in], [more]) -> 1 ([more])"]

    def test_rekeying_before_the_aggregation(self, tmp_path: Path) -> None:
        """A changed key selector of group_by is a re-keying: the old state is under other keys."""
        old = count_app(group=lambda s: s.group_by(key_of_user))
        new = count_app(group=lambda s: s.group_by(key_of_region))
        line = first_line(old, new, tmp_path)
        assert line.startswith(_headline(
            "KSTREAM-AGGREGATE-0000000003 (count): key [the source key, "
            f"select_key({__name__}.key_of_user #")[:-1])
        assert f"] -> [the source key, select_key({__name__}.key_of_region #" in line

    def test_rekeying_added_before_the_aggregation(self, tmp_path: Path) -> None:
        """A select_key added before group_by_key() is stateless, yet re-keys the count."""
        new = count_app(before=lambda s: s.select_key(key_of_user))
        line = first_line(count_app(), new, tmp_path)
        assert line.startswith(_headline("KSTREAM-AGGREGATE-0000000003 (count): key [the source key] -> "
                                         f"[the source key, select_key({__name__}.key_of_user #")[:-1])

    def test_changed_lambda_body_of_key_selector(self) -> None:
        """The same lambda name with another body is another key."""
        old = count_app(group=lambda s: s.group_by(lambda k, v: v["user"]))
        new = count_app(group=lambda s: s.group_by(lambda k, v: v["region"]))
        assert [c.split(":")[1].strip().split(" ")[0] for c in changes(old, new)] == ["key"]

    def test_changed_helper_called_by_key_selector(self) -> None:
        """A function of the same module that the key selector calls is part of its identity."""
        ns: dict[str, Any] = {"__name__": "user_module"}
        exec("def pick(v):\n    return v['user']\nselector = lambda k, v: pick(v)\n", ns)  # noqa: S102
        before = function_identity(ns["selector"])
        exec("def pick(v):\n    return v['region']\n", ns)  # noqa: S102
        assert function_identity(ns["selector"]) != before

    def test_changed_closure_value(self) -> None:
        """A captured plain value (here the field name) is part of a key function's identity."""
        def selector(field: str) -> Callable[[Any, Any], Any]:
            return lambda k, v: v[field]

        assert function_identity(selector("user")) != function_identity(selector("region"))
        assert function_identity(selector("user")) == function_identity(selector("user"))

    def test_cogroup_inputs_changed(self, tmp_path: Path) -> None:
        """A third stream added to a cogroup."""
        def cogroup(n: int) -> Topology:
            b = StreamsBuilder()
            c = b.stream("t0").group_by_key().cogroup(lambda k, v, a: a + 1)
            for i in range(1, n):
                c = c.cogroup(b.stream(f"t{i}").group_by_key(), lambda k, v, a: a + 1)
            c.aggregate(lambda: 0).to_stream().to("out")
            return b.build()

        assert first_line(cogroup(2), cogroup(3), tmp_path) == _headline(
            "COGROUPKSTREAM-MERGE-0000000007 (cogroup): inputs 2 -> 3 (and 1 more change(s), listed below)")
        assert changes(cogroup(2), cogroup(3))[1] == "the topology: sources 2 ([t0], [t1]) -> 3 ([t0], [t1], [t2])"

    def test_changed_operator_backend(self) -> None:
        """The compiler's report of which operator runs an aggregation is compared too."""
        old = topology_fingerprint(count_app(), {AGG: OperatorChoice(Backend.PYTHON, "count; streamsdsl.operator=python")})
        new = topology_fingerprint(count_app(), {AGG: OperatorChoice(Backend.JVM, "count, unwindowed")})
        assert [str(c) for c in diff(old, new)] == [f"{COUNT}: operator python -> jvm"]

    def test_operator_change_caused_by_another_change_is_not_listed(self) -> None:
        """A window added moves a count from Spark's native aggregation to a processor: only
        the window is reported."""
        old = topology_fingerprint(count_app(), {AGG: OperatorChoice(Backend.NATIVE)})
        new = topology_fingerprint(count_app(windows=TimeWindows.of_size_with_no_grace(10)),
                                   {AGG: OperatorChoice(Backend.JVM, "count, tumbling windows")})
        assert [str(c) for c in diff(old, new)] == [
            f"{COUNT}: windows none -> TimeWindows(size=10ms, advance=10ms, grace=0ms)"]

    def test_changed_store_serde(self) -> None:
        """The key serde of the store is part of how the state is keyed."""
        new = count_app(group=lambda s: s.group_by_key(Grouped.with_serdes(Serdes.Long(), None)))
        assert changes(count_app(), new) == [
            f"{COUNT}: serdes key default, value default -> key Serdes.Long(), value default"]

    def test_builtin_aggregation_helper(self) -> None:
        """The Aggregations helpers (callable attrs objects) fingerprint by value, not address."""
        assert function_identity(Aggregations.sum("x").aggregator) == function_identity(Aggregations.sum("x").aggregator)
        assert function_identity(Aggregations.sum("x").aggregator) != function_identity(Aggregations.sum("y").aggregator)


class TestMessage:
    def test_whole_message(self, tmp_path: Path) -> None:
        """The message lists every change, says what is accepted and how to reset."""
        cp = tmp_path / "app" / "checkpoint"
        (cp / "commits").mkdir(parents=True)
        (cp / "commits" / "0").write_text("v1\n")
        check_topology(str(cp), topology_fingerprint(count_app()), application_id="wc", state_dir="/data/state")
        new = count_app(windows=TimeWindows.of_size_with_no_grace(10), agg=lambda g: g.reduce(operator.add))
        with pytest.raises(TopologyChangedError) as info:
            check_topology(str(cp), topology_fingerprint(new), application_id="wc", state_dir="/data/state")
        assert str(info.value) == (
            f"{_headline(f'{REDUCE}: aggregation count -> reduce (and 1 more change(s), listed below)')}\n"
            f"Changes since the checkpoint {cp} was written:\n"
            f"  - {REDUCE}: aggregation count -> reduce\n"
            f"  - {REDUCE}: windows none -> TimeWindows(size=10ms, advance=10ms, grace=0ms)\n"
            "Spark continues a checkpoint only with as many sources and the same stateful operators, in the same "
            "order, keyed the same way. Stateless changes (filters, value mappers, steps after the last "
            "aggregation) are accepted.\n"
            "To keep the state, revert the change. To start afresh (input read again from 'auto.offset.reset', "
            "empty state), stop every instance and run: streamsdsl reset --application-id wc --state-dir "
            "/data/state (or call clean_up() before start()); or give the changed topology a new 'application.id'."
        )
        assert isinstance(info.value, StreamsConfigError) and isinstance(info.value, ValueError)
        assert isinstance(info.value, StreamsDslError)
        assert [c.what for c in info.value.changes] == ["aggregation", "windows"]

    def test_unreadable_fingerprint(self, tmp_path: Path) -> None:
        """A damaged fingerprint file is an error that says how to go on."""
        cp = tmp_path / "cp"
        (cp / "commits").mkdir(parents=True)
        (cp / "commits" / "0").write_text("v1\n")
        (cp / FINGERPRINT_FILE).write_text("{not json")
        with pytest.raises(StreamsConfigError) as info:
            check_topology(str(cp), topology_fingerprint(count_app()), application_id="wc", state_dir="/tmp/streamsdsl")
        assert str(info.value) == (
            f"cannot read the topology fingerprint {cp / FINGERPRINT_FILE} (Expecting property name enclosed in "
            "double quotes: line 1 column 2 (char 1)). If the topology's stateful part did not change, delete that "
            "file (the next start writes a new one); otherwise reset the application: streamsdsl reset "
            "--application-id wc."
        )

    def test_newer_format(self, tmp_path: Path) -> None:
        """A fingerprint of a newer format is not guessed at."""
        with pytest.raises(ValueError, match="^written in format 2 by a newer streamsdsl \\(this one reads 1\\)$"):
            Fingerprint.from_json({"format": 2, "stateful_operators": []})


def test_no_pyspark() -> None:
    """The fingerprint and the checkpoint check import no pyspark (fresh interpreter)."""
    code = ("import sys, streamsdsl.runtime.fingerprint, streamsdsl.runtime.checkpoint; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
