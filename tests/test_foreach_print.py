"""``KStream.foreach`` and ``KStream.print`` (issue 41): terminal steps with Kafka Streams' names
and describe(), Kafka's print format (``PrintForeachAction``: ``[label]: key, value``, the label
by default the printed stream's node), `Printed`'s checks, and the TopologyTestDriver running
them on every host (a file stands for what the Python workers print)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamsdsl import InvalidArgumentError, InvalidTypeError, Named, Printed, StreamsBuilder, TestRecord
from streamsdsl.runtime.driver import TopologyTestDriver

R = TestRecord


class TestApi:
    def test_describe(self) -> None:
        """Kafka's names (KSTREAM-FOREACH-, KSTREAM-PRINTER-, an index burnt for a given name)
        and describe(): terminal processors with no successor."""
        b = StreamsBuilder()
        s = b.stream("in")
        assert s.foreach(lambda k, v: None) is None
        assert s.print(Printed.to_sys_out()) is None
        s.foreach(lambda k, v: None, name=Named.as_("each"))
        s.print(Printed.to_sys_out().with_name("show"))
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
            "      --> KSTREAM-FOREACH-0000000001, KSTREAM-PRINTER-0000000002, each, show\n"
            "    Processor: KSTREAM-FOREACH-0000000001 (stores: [])\n"
            "      --> none\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: KSTREAM-PRINTER-0000000002 (stores: [])\n"
            "      --> none\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: each (stores: [])\n"
            "      --> none\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: show (stores: [])\n"
            "      --> none\n"
            "      <-- KSTREAM-SOURCE-0000000000\n\n"
        )

    def test_early_errors(self) -> None:
        """Wrong arguments fail when written, naming the argument and the fix."""
        s = StreamsBuilder().stream("in")
        with pytest.raises(InvalidTypeError) as e:
            s.foreach(lambda v: None)
        assert str(e.value) == ("'action' must accept 2 positional arguments (key, value); lambda v has 1 (v). "
                                "Use lambda key, value: ...")
        with pytest.raises(InvalidTypeError, match=r"^foreach\(\) needs action"):
            s.foreach()
        with pytest.raises(InvalidTypeError, match=r"^print\(\) needs printed"):
            s.print()
        with pytest.raises(InvalidTypeError) as e:
            s.print("stdout")  # type: ignore[arg-type]
        assert str(e.value) == ("'printed' must be a Printed such as Printed.to_sys_out() or Printed.to_file(path) "
                                "(got str: 'stdout').")

    def test_other_stages_say_where_they_are(self) -> None:
        """A KTable or a grouped stream has no foreach / print / repartition: the error says so."""
        from streamsdsl.errors import StageMethodError

        b = StreamsBuilder()
        with pytest.raises(StageMethodError) as e:
            b.table("t").foreach(print)
        assert str(e.value) == "KTable has no 'foreach': foreach() exists on KStream; call to_stream() first."
        with pytest.raises(StageMethodError, match=r"^KGroupedStream has no 'print': print\(\) exists on KStream"):
            b.stream("s").group_by_key().print(Printed.to_sys_out())
        with pytest.raises(StageMethodError, match=r"^KTable has no 'repartition'"):
            b.table("t2").repartition()

    def test_printed_checks_its_arguments(self) -> None:
        """Printed is immutable and checks each argument when it is given (Kafka: requireNonNull,
        'filePath can't be an empty string')."""
        with pytest.raises(InvalidArgumentError, match="^'file_path' must not be blank"):
            Printed.to_file("  ")
        with pytest.raises(InvalidTypeError, match=r"^'file_path' must be a str or a path \(got None\)"):
            Printed.to_file(None)  # type: ignore[arg-type]
        with pytest.raises(InvalidTypeError, match=r"^'file_path' must be a str or a path \(got int: 3\)"):
            Printed.to_file(3)  # type: ignore[arg-type]
        with pytest.raises(InvalidTypeError, match=r"^'label' must be a str \(got None\)"):
            Printed.to_sys_out().with_label(None)  # type: ignore[arg-type]
        with pytest.raises(InvalidTypeError, match=r"^'mapper' must accept 2 positional arguments \(key, value\)"):
            Printed.to_sys_out().with_key_value_mapper(lambda v: v)
        with pytest.raises(InvalidTypeError, match=r"^'mapper' must be a callable of shape"):
            Printed.to_sys_out().with_key_value_mapper(None)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="illegal character"):
            Printed.to_sys_out().with_name("a b")
        base = Printed.to_file(Path("/tmp/x.txt"))
        assert base.file_path == "/tmp/x.txt" and base.with_label("l") is not base and base.label is None


class TestDirectEngine:
    def test_print_format_like_kafka(self, capsys: pytest.CaptureFixture[str]) -> None:
        """PrintForeachAction's lines: ``[label]: key, value`` (null for None), the label by
        default the printed stream's node name, a key-value mapper's text after the label."""
        b = StreamsBuilder()
        s = b.stream("in")
        s.print(Printed.to_sys_out())
        s.map_values(lambda v: v).print(Printed.to_sys_out().with_label("orders")
                                        .with_key_value_mapper(lambda k, v: f"{k}={v}"))
        with TopologyTestDriver(b.build(), engine="direct") as d:
            topic = d.create_input_topic("in")
            topic.pipe_input("a", "x", 1)
            topic.pipe_input(None, None, 2)
        assert capsys.readouterr().out.splitlines() == [
            "[KSTREAM-SOURCE-0000000000]: a, x", "[orders]: a=x",
            "[KSTREAM-SOURCE-0000000000]: null, null", "[orders]: None=None",
        ]

    def test_foreach_sees_every_record_in_order(self) -> None:
        """foreach runs for every record reaching it, in pipe order, by the driver's close at the
        latest (its next read before that)."""
        seen: list[tuple[Any, Any]] = []
        b = StreamsBuilder()
        b.stream("in").filter(lambda k, v: v != "skip").foreach(lambda k, v: seen.append((k, v)))
        with TopologyTestDriver(b.build(), engine="direct") as d:
            topic = d.create_input_topic("in")
            for i, v in enumerate(("a", "skip", "b")):
                topic.pipe_input(f"k{i}", v, i)
        assert seen == [("k0", "a"), ("k2", "b")]

    def test_an_action_error_names_the_processor(self) -> None:
        """A failing action raises the driver's UserFunctionError naming the step and the function."""
        from streamsdsl import UserFunctionError

        b = StreamsBuilder()
        b.stream("in").foreach(lambda k, v: 1 / 0)
        d = TopologyTestDriver(b.build(), engine="direct")
        d.create_input_topic("in").pipe_input("k", "v", 0)
        with pytest.raises(UserFunctionError, match="KSTREAM-FOREACH-0000000001.*action"):
            d.close()


def file_topology(tmp_path: Path) -> Any:
    """Prints to a file and writes the same records to ``out``: the file is what the workers printed."""
    b = StreamsBuilder()
    s = b.stream("in")
    s.print(Printed.to_file(tmp_path / "printed.txt").with_label("in"))
    s.map_values(lambda k, v: f"{k}:{v}").foreach(_AppendTo(str(tmp_path / "each.txt")))
    s.to("out")
    return b.build()


class _AppendTo:
    """A foreach action Spark's workers can run: appends ``key value`` lines to a file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, key: Any, value: Any) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(f"{key} {value}\n")


@pytest.mark.every_host
@pytest.mark.streaming_host
def test_the_driver_runs_them_on_every_host(run_driver: Any, host: str, tmp_path: Path) -> None:
    """On every host each record is printed and passed to the action once; in order where one
    task runs the records (the direct engine; the streaming host, a micro-batch per record): the
    Spark engine's tasks run side by side, and their lines interleave (docs: foreach and print)."""
    records = [("a", "x", 1), ("b", None, 2), ("a", "y", 3)]
    assert run_driver(file_topology(tmp_path), records) == [R("a", "x", 1), R("b", None, 2), R("a", "y", 3)]
    printed = (tmp_path / "printed.txt").read_text().splitlines()
    each = (tmp_path / "each.txt").read_text().splitlines()
    in_order = (["[in]: a, x", "[in]: b, null", "[in]: a, y"], ["a a:x", "b b:None", "a a:y"])
    if host in ("spark", "spark-jvm"):
        assert (sorted(printed), sorted(each)) == tuple(sorted(lines) for lines in in_order)
    else:
        assert (printed, each) == in_order
