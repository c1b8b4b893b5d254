"""The DSL side of a windowed stream–stream join: the IR nodes ``KStream.join`` adds (the join
windows and options are value objects: `streamsdsl.values.joins`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamsdsl import ir
from streamsdsl._validation import REQUIRED, require_arguments, validate_name
from streamsdsl.dsl.repartition import repartition_for_join
from streamsdsl.dsl.stage import _user_fn, joiner_shapes
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError
from streamsdsl.values.joins import JoinWindows, StreamJoined

if TYPE_CHECKING:
    from streamsdsl.dsl.api import StreamsBuilder

__all__ = ["stream_stream_join_node"]

_KINDS = {"inner": "join", "left": "left_join", "outer": "outer_join"}
_EXAMPLE = "JoinWindows.of_time_difference_with_no_grace(timedelta(seconds=5))"


def stream_stream_join_node(builder: StreamsBuilder, this: str, other: str, joiner: Any, windows: Any,
                            stream_joined: Any, name: str | None, kind: str, repartition: tuple[bool, bool]) -> ir.Node:
    """Check a stream–stream join as written and add its node (names as Kafka Streams'
    ``KStreamImplJoin`` makes them, five name indexes burnt even for a named join).

    ``repartition``: whether this and the other stream were re-keyed; such a side reads a
    repartition first (``KStreamImpl.doJoin``), named ``<name>-left`` / ``<name>-right`` after
    the join's name, else after the stream's own node."""
    method = _KINDS[kind]
    require_arguments(method, f"{method}(other_stream, lambda value, other_value: ..., {_EXAMPLE})",
                      ("joiner", joiner, "(value, other_value) -> value"))
    if windows is None or windows is REQUIRED:
        raise InvalidArgumentError(
            f"'windows' is required: a stream-stream {method}() joins records whose timestamps are close; say how "
            f"close with e.g. {method}(other, joiner, {_EXAMPLE}).")
    if not isinstance(windows, JoinWindows):
        raise InvalidTypeError(
            f"'windows' must be a JoinWindows, e.g. {_EXAMPLE} (got {type(windows).__name__}: {windows!r}).")
    if stream_joined is not None and not isinstance(stream_joined, StreamJoined):
        raise InvalidTypeError(
            f"'stream_joined' must be a StreamJoined, e.g. StreamJoined.with_serdes(key, value, other_value) "
            f"(got {type(stream_joined).__name__}: {stream_joined!r}).")
    sj = stream_joined or StreamJoined()
    user = name if name is not None else sj.name
    sides = [this, other]
    for i, (suffix, value_serde) in enumerate((("-left", sj.value_serde), ("-right", sj.other_value_serde))):
        if repartition[i]:
            sides[i] = repartition_for_join(builder, sides[i], sides[i] if user is None else f"{user}{suffix}",
                                            key_serde=sj.key_serde, value_serde=value_serde)
    this, other = sides
    fn = _user_fn(joiner, "joiner", joiner_shapes("other_value"))
    left_outer, right_outer = kind != "inner", kind == "outer"

    def suffixed(suffix: str, generated: str) -> str:
        return generated if user is None else validate_name(f"{user}{suffix}", "name")

    this_windowed = suffixed("-this-windowed", builder._new_name("KSTREAM-WINDOWED-"))
    other_windowed = suffixed("-other-windowed", builder._new_name("KSTREAM-WINDOWED-"))
    this_generated = builder._new_name("KSTREAM-OUTERTHIS-" if right_outer else "KSTREAM-JOINTHIS-")
    other_generated = builder._new_name("KSTREAM-OUTEROTHER-" if left_outer else "KSTREAM-JOINOTHER-")
    this_suffix = "-outer-this-join" if right_outer else "-this-join"
    other_suffix = "-outer-other-join" if left_outer else "-other-join"
    merge = suffixed("-merge", builder._new_name("KSTREAM-MERGE-"))
    base = sj.store_name
    outer_store = None
    if left_outer:
        shared = (f"{base}{'-outer-shared-join' if right_outer else '-left-shared-join'}" if base is not None
                  else "KSTREAM-OUTERSHARED-" + this_generated.rsplit("-", 1)[1])
        outer_store = validate_name(f"{shared}-store", "store_name")
    node = ir.StreamStreamJoinNode(
        merge, (this, other), joiner=fn, kind=kind, windows=windows,
        this_windowed=this_windowed, other_windowed=other_windowed,
        join_this=suffixed(this_suffix, this_generated), join_other=suffixed(other_suffix, other_generated),
        this_store=validate_name(f"{this_generated if base is None else base + this_suffix}-store", "store_name"),
        other_store=validate_name(f"{other_generated if base is None else base + other_suffix}-store", "store_name"),
        outer_store=outer_store, key_serde=sj.key_serde, value_serde=sj.value_serde,
        other_value_serde=sj.other_value_serde,
    )
    builder._add(node)
    return node
