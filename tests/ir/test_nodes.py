"""IR nodes are valid by construction: every field and cross-field rule is checked when a node is
built directly, with the exact exception type and message."""

from __future__ import annotations

import re

from typing import Any, Callable

import attrs
import pytest

from streamsdsl import ir
from streamsdsl.values.serdes import CustomSerde, Serdes
from streamsdsl.values.windows import EmitStrategy, SessionWindows, SlidingWindows, TimeWindows
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError, StreamsDslError
from streamsdsl.ir.topology import DescriptionBuilder

ILLEGAL = "contains an illegal character; legal characters are ASCII letters, digits, '.', '_' and '-'."


class Column:
    """Stands in for a pyspark Column (recognised by type name and module, as the IR does)."""

    __module__ = "pyspark.sql.column"

    def __repr__(self) -> str:
        return "Column<'value'>"


def init() -> int:
    return 0


def add(key: Any, value: Any, aggregate: Any) -> Any:
    return aggregate + value


def merge(key: Any, left: Any, right: Any) -> Any:
    return left + right


class Text:
    def serialize(self, value: Any) -> bytes:
        return str(value).encode()

    def deserialize(self, data: bytes) -> str:
        return data.decode()


INIT = ir.UserFn(init, "() -> aggregate")
ADD = ir.UserFn(add, "(key, value, aggregate) -> aggregate")
MERGE = ir.UserFn(merge, "(key, aggregate1, aggregate2) -> aggregate")
COL = ir.ColumnFn(Column())
SESSIONS = SessionWindows(5)
CLOSE = EmitStrategy.on_window_close()
UPDATE = EmitStrategy.on_window_update()


def agg_node(cls: type = ir.AggregateNode, **changes: Any) -> Any:
    fields: dict[str, Any] = {"agg": ir.CountAgg(), "store": "store"}
    if cls is ir.SessionAggregateNode:
        fields |= {"windows": SESSIONS, "emit": UPDATE}
    elif cls is ir.TimeWindowAggregateNode:
        fields |= {"windows": TimeWindows(10), "emit": UPDATE}
    return cls("agg", ("src",), **(fields | changes))


def cogroup(**changes: Any) -> ir.CogroupAggregateNode:
    fields: dict[str, Any] = {
        "agg_names": ("agg-0", "agg-1"), "aggregators": (ADD, ADD), "initializer": INIT, "store": "store",
    }
    return ir.CogroupAggregateNode("merge", ("a", "b"), **(fields | changes))


SERDE_HINT = "Wrap a serde of your own with CustomSerde(serde)."
TAKES_PYTHON = "This step runs a Python callable; pyspark Columns are not accepted here."
NEEDS_MERGER = (
    "over SessionWindows needs a 'merger' (key, aggregate1, aggregate2) -> aggregate: "
    "sessions bridged by a record are merged."
)

INVALID: list[tuple[str, Callable[[], Any], type[StreamsDslError], str]] = [
    # functions
    ("UserFn not callable", lambda: ir.UserFn(42, "() -> x"), InvalidTypeError,
     "'fn' must be a callable of shape () -> x (got int: 42)."),
    ("UserFn shape", lambda: ir.UserFn(init, 3), InvalidTypeError, "'shape' must be str (got int: 3)."),
    ("ColumnFn", lambda: ir.ColumnFn("value"), InvalidTypeError,
     "'column' must be a pyspark Column (got str: 'value')."),
    ("ReduceAgg", lambda: ir.ReduceAgg(None), InvalidTypeError,
     "'reducer' must be UserFn or ColumnFn (got NoneType: None)."),
    ("AggregateAgg without initializer", lambda: ir.AggregateAgg(None, ADD), InvalidArgumentError,
     "'initializer' is required when 'aggregator' is a Python callable: it makes the first aggregate."),
    ("AggregateAgg Column with initializer", lambda: ir.AggregateAgg(INIT, COL), InvalidArgumentError,
     "'initializer' and 'merger' must be None when 'aggregator' is a pyspark aggregate Column; "
     "the Column defines the whole aggregation."),
    ("AggregateAgg merger type", lambda: ir.AggregateAgg(INIT, ADD, "m"), InvalidTypeError,
     "'merger' must be UserFn or None (got str: 'm')."),
    # names and parents
    ("name illegal", lambda: ir.SourceNode("bad name", (), ("t",)), InvalidArgumentError,
     f"'name' 'bad name' {ILLEGAL}"),
    ("name type", lambda: ir.SourceNode(5, (), ("t",)), InvalidTypeError, "'name' must be a str (got int: 5)."),
    ("name too long", lambda: ir.MergeNode("m" * 250, ("a", "b")), InvalidArgumentError,
     "'name' is 250 characters long; the limit is 249 characters."),
    ("parents list", lambda: ir.TableToStreamNode("t", ["s"]), InvalidTypeError,
     "'parents' must be a tuple of str (got list: ['s'])."),
    ("parents item", lambda: ir.TableToStreamNode("t", (1,)), InvalidTypeError,
     "'parents[0]' must be a str (got int: 1)."),
    ("parents arity 1", lambda: ir.FilterNode("f", (), predicate=COL), InvalidArgumentError,
     "'parents' of a FilterNode must name exactly 1 node(s) (got ())."),
    ("merge arity", lambda: ir.MergeNode("m", ("a",)), InvalidArgumentError,
     "'parents' of a MergeNode must name exactly 2 node(s) (got ('a',))."),
    ("source arity", lambda: ir.SourceNode("s", ("x",), ("t",)), InvalidArgumentError,
     "'parents' of a SourceNode must name exactly 0 node(s) (got ('x',))."),
    # topics
    ("no topics", lambda: ir.SourceNode("s", (), ()), InvalidArgumentError,
     "Source s must read topics or a pattern, not both or neither (topics=(), pattern=None)."),
    ("topics and pattern", lambda: ir.SourceNode("s", (), ("t",), pattern=re.compile("t.*")), InvalidArgumentError,
     "Source s must read topics or a pattern, not both or neither (topics=('t',), pattern=re.compile('t.*'))."),
    ("pattern with flags", lambda: ir.SourceNode("s", (), (), pattern=re.compile("t", re.I)), InvalidArgumentError,
     "'pattern' is a pattern compiled with flags (re.IGNORECASE): Spark's Kafka connector compiles the pattern as "
     "a Java regular expression, which receives no Python flags. Write them inline instead, e.g. "
     "re.compile('(?i)t') for re.IGNORECASE."),
    ("table source pattern", lambda: ir.TableSourceNode("s", (), ("t",), pattern=re.compile("t.*"), source_name="x",
                                                        store="st"), InvalidArgumentError,
     "Source s must read topics or a pattern, not both or neither (topics=('t',), pattern=re.compile('t.*'))."),
    ("topic dot", lambda: ir.SourceNode("s", (), ("t", "..")), InvalidArgumentError, "'topics[1]' cannot be '.' or '..'."),
    ("sink topic empty", lambda: ir.SinkNode("k", ("s",), topic=""), InvalidArgumentError,
     "'topic' must not be empty. Pass a name such as 'orders-count'."),
    ("repartition topic", lambda: ir.RepartitionNode("r", ("s",), topic="a b", filter_name="f", sink_name="k"),
     InvalidArgumentError, f"'topic' 'a b' {ILLEGAL}"),
    ("repartition filter name", lambda: ir.RepartitionNode("r", ("s",), topic="t", filter_name="f/1", sink_name="k"),
     InvalidArgumentError, f"'filter_name' 'f/1' {ILLEGAL}"),
    # serdes
    ("serde string", lambda: ir.SourceNode("s", (), ("t",), Serdes.String(), "json"), InvalidTypeError,
     f"'value_serde' must be PlanSerde or None (got str: 'json'). {SERDE_HINT}"),
    ("serde unwrapped", lambda: ir.SinkNode("k", ("s",), topic="t", key_serde=Serdes), InvalidTypeError,
     f"'key_serde' must be PlanSerde or None (got type: <class 'streamsdsl.values.serdes.Serdes'>). {SERDE_HINT}"),
    # functions on nodes
    ("predicate", lambda: ir.FilterNode("f", ("s",), predicate="x"), InvalidTypeError,
     "'predicate' must be UserFn or ColumnFn (got str: 'x')."),
    ("negate", lambda: ir.TableFilterNode("f", ("s",), predicate=COL, negate="yes"), InvalidTypeError,
     "'negate' must be bool (got str: 'yes')."),
    ("map takes python", lambda: ir.MapNode("m", ("s",), mapper=COL), InvalidTypeError,
     f"'mapper' must be UserFn (got ColumnFn: Column<Column<'value'>>). {TAKES_PYTHON}"),
    ("peek action", lambda: ir.PeekNode("p", ("s",), action=print), InvalidTypeError,
     f"'action' must be UserFn (got builtin_function_or_method: <built-in function print>). {TAKES_PYTHON}"),
    # aggregations
    ("agg type", lambda: agg_node(agg="count"), InvalidTypeError,
     "'agg' must be CountAgg or ReduceAgg or AggregateAgg (got str: 'count')."),
    ("store name", lambda: agg_node(store="a/b"), InvalidArgumentError, f"'store' 'a/b' {ILLEGAL}"),
    ("unwindowed merger", lambda: agg_node(agg=ir.AggregateAgg(INIT, ADD, MERGE)), InvalidArgumentError,
     "The aggregation of AggregateNode without windows takes no 'merger' (only sessions merge); pass merger=None."),
    ("session windows type", lambda: agg_node(ir.SessionAggregateNode, windows=TimeWindows(10)), InvalidTypeError,
     "'windows' must be SessionWindows (got TimeWindows: TimeWindows(size=10ms, advance=10ms, grace=0ms))."),
    ("session merger", lambda: agg_node(ir.SessionAggregateNode, agg=ir.AggregateAgg(INIT, ADD)),
     InvalidArgumentError, f"The aggregation of SessionAggregateNode {NEEDS_MERGER}"),
    ("session column", lambda: agg_node(ir.SessionAggregateNode, agg=ir.ReduceAgg(COL)), InvalidTypeError,
     "The aggregation of SessionAggregateNode takes Python callables only: "
     "windowed aggregations do not compile pyspark Columns."),
    ("session emit", lambda: agg_node(ir.SessionAggregateNode, emit="on_close"), InvalidTypeError,
     "'emit' must be EmitStrategy (got str: 'on_close')."),
    ("time windows type", lambda: agg_node(ir.TimeWindowAggregateNode, windows=SESSIONS), InvalidTypeError,
     "'windows' must be TimeWindows or SlidingWindows (got SessionWindows: SessionWindows(gap=5ms, grace=0ms))."),
    ("time merger", lambda: agg_node(ir.TimeWindowAggregateNode, agg=ir.AggregateAgg(INIT, ADD, MERGE)),
     InvalidArgumentError,
     "The aggregation of TimeWindowAggregateNode over TimeWindows takes no 'merger' (only sessions merge); "
     "pass merger=None."),
    # cogroup
    ("cogroup lengths", lambda: cogroup(agg_names=("agg-0",)), InvalidArgumentError,
     "A cogroup needs one aggregator and one agg name per input, and at least one input "
     "(got 2 parents, 1 agg_names, 2 aggregators)."),
    ("cogroup no inputs", lambda: ir.CogroupAggregateNode("m", (), agg_names=(), aggregators=(), initializer=INIT,
                                                          store="s"),
     InvalidArgumentError, "'agg_names' must hold at least 1 item(s) (got ())."),
    ("cogroup aggregators list", lambda: cogroup(aggregators=[ADD, ADD]), InvalidTypeError,
     "'aggregators' must be a tuple of UserFn (got list: "
     "[add(key, value, aggregate) -> aggregate, add(key, value, aggregate) -> aggregate])."),
    ("cogroup aggregator Column", lambda: cogroup(aggregators=(ADD, COL)), InvalidTypeError,
     "'aggregators[1]' must be UserFn (got ColumnFn: Column<Column<'value'>>)."),
    ("cogroup windows type", lambda: cogroup(windows=5), InvalidTypeError,
     "'windows' must be SessionWindows or TimeWindows or SlidingWindows or None (got int: 5)."),
    ("cogroup session merger", lambda: cogroup(windows=SESSIONS), InvalidArgumentError,
     f"A cogroup {NEEDS_MERGER}"),
    ("cogroup unwindowed merger", lambda: cogroup(merger=MERGE), InvalidArgumentError,
     "A cogroup without windows takes no 'merger' (only sessions merge); pass merger=None."),
    ("cogroup sliding merger", lambda: cogroup(merger=MERGE, windows=SlidingWindows(5)), InvalidArgumentError,
     "A cogroup over SlidingWindows takes no 'merger' (only sessions merge); pass merger=None."),
    ("cogroup emit unwindowed", lambda: cogroup(emit=CLOSE), InvalidArgumentError,
     "'emit' can be on_window_close() only for a windowed cogroup: an unwindowed table never closes."),
]


class TestInvalidNodes:
    @pytest.mark.parametrize(("case", "build", "error", "message"), INVALID, ids=[c[0] for c in INVALID])
    def test_direct_construction_fails(self, case: str, build: Callable[[], Any], error: type, message: str) -> None:
        """Each invalid field or field combination fails with the exact type and message."""
        with pytest.raises(error) as exc:
            build()
        assert type(exc.value) is error
        assert str(exc.value) == message

    def test_evolve_is_validated_too(self) -> None:
        """attrs.evolve builds through the same validators: a node cannot be made invalid later."""
        node = ir.SinkNode("k", ("s",), topic="t")
        with pytest.raises(InvalidArgumentError, match="'topic' 'a b' contains an illegal character"):
            attrs.evolve(node, topic="a b")


class TestValidNodes:
    def test_user_serde_arrives_wrapped(self) -> None:
        """An IR node holds plan serdes: a user's serde wrapped in CustomSerde is accepted."""
        serde = CustomSerde(Text())
        node = ir.SourceNode("s", (), ("t",), Serdes.String(), serde)
        assert node.value_serde is serde and node.value_serde.spark_type == "binary"

    def test_windowed_nodes_accept_their_windows(self) -> None:
        """Session nodes take SessionWindows; time nodes TimeWindows or SlidingWindows; cogroups any."""
        assert agg_node(ir.SessionAggregateNode, agg=ir.AggregateAgg(INIT, ADD, MERGE)).windows == SESSIONS
        assert agg_node(ir.TimeWindowAggregateNode, windows=SlidingWindows(3), emit=CLOSE).emit == CLOSE
        assert cogroup(windows=SESSIONS, merger=MERGE, emit=CLOSE).stores == ("store",)
        assert cogroup(windows=TimeWindows(10)).merger is None

    def test_unwindowed_column_aggregate(self) -> None:
        """An unwindowed aggregation may be a pyspark aggregate Column alone."""
        assert agg_node(agg=ir.AggregateAgg(None, COL)).agg.aggregator == COL


class TestNodeTypes:
    def test_node_types_are_discovered(self) -> None:
        """NODE_TYPES is every concrete Node subclass defined in the IR's modules (ir.nodes,
        ir.processors, ir.fk_join, ir.global_tables), found, not listed by hand (the shared bases, `UnaryNode` and the private
        ones, are not node types)."""
        defined = {
            c for module in (ir.nodes, ir.processors, ir.fk_join, ir.global_tables) for c in vars(module).values()
            if isinstance(c, type) and issubclass(c, ir.Node) and c not in (ir.Node, ir.nodes.UnaryNode)
            and not c.__name__.startswith("_")
        }
        assert isinstance(ir.NODE_TYPES, frozenset)
        assert set(ir.NODE_TYPES) == defined
        assert {ir.AggregateNode, ir.SessionAggregateNode, ir.CogroupAggregateNode} <= ir.NODE_TYPES

    def test_subclass_elsewhere_is_not_a_node_type(self) -> None:
        """A Node subclass defined outside the IR's modules (an extension) is not in NODE_TYPES."""

        @attrs.frozen
        class Extension(ir.Node):
            pass

        assert Extension not in ir.NODE_TYPES


class TestDescribeInto:
    def test_default_is_one_processor(self) -> None:
        """A node without its own description is one processor with its stores, fed by its parents."""

        @attrs.frozen
        class Extension(ir.Node):
            pass

        builder = DescriptionBuilder()
        ir.SourceNode("s", (), ("t",)).describe_into(builder)
        Extension("x", ("s",)).describe_into(builder)
        [source, x] = builder.build()
        assert (source.kind, source.detail, source.successors) == ("Source", "topics: [t]", ("x",))
        assert (x.kind, x.detail, x.predecessors) == ("Processor", "stores: []", ("s",))

    def test_repartition_expands_to_three_nodes(self) -> None:
        """A repartition describes itself as filter → sink → topic → source."""
        builder = DescriptionBuilder()
        ir.SourceNode("s", (), ("t",)).describe_into(builder)
        ir.RepartitionNode("r-source", ("s",), topic="r", filter_name="r-filter", sink_name="r-sink").describe_into(
            builder
        )
        described = [(d.name, d.kind, d.detail, d.successors, d.predecessors) for d in builder.build()]
        assert described == [
            ("s", "Source", "topics: [t]", ("r-filter",), ()),
            ("r-filter", "Processor", "stores: []", ("r-sink",), ("s",)),
            ("r-sink", "Sink", "topic: r", (), ("r-filter",)),
            ("r-source", "Source", "topics: [r]", (), ()),
        ]

    def test_cogroup_describes_one_processor_per_input_and_a_merge(self) -> None:
        """A cogroup is one -cogroup-agg processor per input (holding the store) and the merge node."""
        builder = DescriptionBuilder()
        for name in ("a", "b"):
            ir.SourceNode(name, (), (f"t{name}",)).describe_into(builder)
        cogroup().describe_into(builder)
        described = {d.name: (d.detail, d.successors, d.predecessors) for d in builder.build()}
        assert described["agg-0"] == ("stores: [store]", ("merge",), ("a",))
        assert described["agg-1"] == ("stores: [store]", ("merge",), ("b",))
        assert described["merge"] == ("stores: []", (), ("agg-0", "agg-1"))
