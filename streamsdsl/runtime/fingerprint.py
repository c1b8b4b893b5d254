"""The fingerprint of a topology's stateful part, and what changed between two of them.

Spark keeps an application's operator state in its checkpoint, matched to the operators of the
plan by position. A topology may change between two runs on the same checkpoint as long as its
*stateful part* stays the same: `topology_fingerprint` computes that part from the IR (pure
Python, no pyspark), `diff` compares two fingerprints and returns the incompatible changes.

For every stateful operator (each node with a store: aggregations, windowed and session
aggregations, cogroups), in topological order, the fingerprint holds:

- ``name``: its Kafka Streams name and ``store``: its store name (shown in messages; a changed
  name alone is accepted, since Spark matches state by position and generated names shift when
  a stateless step is added upstream);
- ``kind`` (``count``, ``reduce``, ``aggregate``, ``cogroup``), ``windows``, ``emit`` (an
  unwindowed aggregation emits on update),
  ``serdes`` (key and value serde of the store), ``inputs`` (a cogroup's number of grouped
  streams) and ``backend`` (the operator that runs it, from the compiler's report);
- ``key``: what determines its key, the chain of key-changing steps upstream of it
  (``select_key``, the selector of ``group_by``, ``map``, ``flat_map``, merges, the key of an
  upstream stateful operator), one chain per input; a merge of inputs keyed alike keys like
  each of them.

It also holds the topics of each source node: Spark keeps one offset per source in the
checkpoint and cannot continue it with another number of sources.

User functions cannot be compared by value. A function in a key chain is identified by a
digest of its code (`function_identity`): its bytecode, constants, names, argument names, the
values of its defaults and closure variables (when they are plain values), and, recursively, the
code of the functions it calls from its own module. Its qualified name is kept for messages
only, so renaming a key selector is accepted and changing its body is not. Bytecode differs
between Python minor versions: when the checkpoint was written by another Python version, the
functions are compared by qualified name instead. Functions *not* in a key chain (filters, value
mappers, a mapper after the last aggregation, aggregators and reducers) are not part of the
fingerprint: changing them is accepted, as in Kafka Streams.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import types
from collections.abc import Mapping
from difflib import SequenceMatcher
from typing import Any, Callable

import attrs

from streamsdsl import ir
from streamsdsl._validation import is_spark_column
from streamsdsl.values.windows import EmitStrategy
from streamsdsl.ir.topology import Topology

__all__ = ["FORMAT", "Change", "Fingerprint", "describe_key", "diff", "function_identity", "topology_fingerprint"]

#: The version of the fingerprint's JSON format.
FORMAT = 1

#: How deep `function_identity` follows calls into functions of the same module.
_MAX_DEPTH = 4
_PLAIN = (str, int, float, bool, bytes, type(None), complex)


def _python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


# -- user functions ------------------------------------------------------------------------------
def _const(value: Any) -> str:
    """A process-independent rendering of a constant or a captured value (a frozenset's order
    depends on the string hash seed; an object's default repr on its address)."""
    if isinstance(value, _PLAIN):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}({', '.join(_const(v) for v in value)})"
    if isinstance(value, (frozenset, set)):
        return f"{type(value).__name__}({', '.join(sorted(_const(v) for v in value))})"
    if isinstance(value, dict):
        items = sorted(f"{_const(k)}: {_const(v)}" for k, v in value.items())
        return f"dict({', '.join(items)})"
    if attrs.has(type(value)):
        return repr(value)
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


def _digest_code(code: types.CodeType, h: Any) -> None:
    h.update(code.co_code)
    h.update(repr((code.co_argcount, code.co_kwonlyargcount, code.co_varnames, code.co_names,
                   code.co_freevars, code.co_cellvars)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _digest_code(const, h)
        else:
            h.update(_const(const).encode())


def _digest_function(fn: Any, h: Any, seen: set[int], depth: int) -> None:
    """Feed ``fn``'s behaviour-defining parts into ``h`` (see the module docstring)."""
    if id(fn) in seen:
        h.update(b"<recursion>")
        return
    seen.add(id(fn))
    if isinstance(fn, functools.partial):
        h.update(b"partial")
        _digest_function(fn.func, h, seen, depth)
        h.update(_const(fn.args).encode())
        h.update(_const(dict(fn.keywords)).encode())
        return
    if isinstance(fn, types.MethodType):
        h.update(_const(fn.__self__).encode())
        fn = fn.__func__
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        # A builtin (operator.add, max) or a callable object: its name, and its value when that
        # renders without an address (attrs classes such as the Aggregations helpers).
        h.update(_name(fn).encode())
        h.update(_const(fn).encode())
        call = getattr(type(fn), "__call__", None)
        if isinstance(getattr(call, "__code__", None), types.CodeType) and not attrs.has(type(fn)):
            _digest_function(call, h, seen, depth)
        return
    _digest_code(code, h)
    h.update(_const(getattr(fn, "__defaults__", None)).encode())
    h.update(_const(getattr(fn, "__kwdefaults__", None)).encode())
    module = getattr(fn, "__module__", None)
    callees: list[Any] = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            h.update(b"<empty>")
            continue
        if isinstance(value, (types.FunctionType, functools.partial)):
            callees.append(value)
        else:
            h.update(_const(value).encode())
    fn_globals = getattr(fn, "__globals__", {})
    for name in code.co_names:
        value = fn_globals.get(name)
        if isinstance(value, types.FunctionType) and value.__module__ == module:
            callees.append(value)
    if depth < _MAX_DEPTH:
        for callee in callees:
            _digest_function(callee, h, seen, depth + 1)


def _name(fn: Any) -> str:
    target = fn.func if isinstance(fn, functools.partial) else fn
    qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
    module = getattr(target, "__module__", None) or type(target).__module__
    return f"{module}.{qualname}" if module not in (None, "builtins") else qualname


def function_identity(fn: ir.UserFn | ir.ColumnFn | Callable[..., Any]) -> dict[str, str]:
    """``{"name": qualified name, "code": digest}`` of a user function (see the module docstring).

    A pyspark Column is identified by its expression text.

    Examples
    --------
    >>> a = function_identity(lambda k, v: v["user"])
    >>> b = function_identity(lambda key, value: value["user"])
    >>> a["name"], a["code"] == function_identity(lambda k, v: v["user"])["code"], a["code"] == b["code"]
    ('streamsdsl.runtime.fingerprint.<lambda>', True, False)
    """
    if isinstance(fn, ir.ColumnFn):
        fn = fn.column
    elif isinstance(fn, ir.UserFn):
        fn = fn.fn
    if is_spark_column(fn):
        text = f"Column<{fn}>"
        return {"name": text, "code": hashlib.sha256(text.encode()).hexdigest()[:16]}
    h = hashlib.sha256()
    _digest_function(fn, h, set(), 0)
    return {"name": _name(fn), "code": h.hexdigest()[:16]}


# -- the fingerprint -----------------------------------------------------------------------------
_KEY_STEPS: dict[type[ir.Node], tuple[str, str]] = {
    ir.SelectKeyNode: ("select_key", "selector"),
    ir.MapNode: ("map", "mapper"),
    ir.FlatMapNode: ("flat_map", "mapper"),
}


def _key_chain(topology: Topology, name: str, positions: Mapping[str, int]) -> list[Any]:
    """The key-changing steps from the sources to the output of node ``name``, source first.

    A step is ``{"step": "select_key" | "map" | "flat_map", "fn": identity}``; a merge is
    ``{"step": "merge", "inputs": [chain, ...]}``; the chain starts at ``{"step": "source"}``
    (the key as read) or ``{"step": "stateful", "index": i}`` (the key of stateful operator
    ``i``, whose own fingerprint holds how it is computed). Key-preserving steps are skipped.
    """
    chain: list[Any] = []
    node = topology.node(name)
    while True:
        if node.name in positions:
            chain.append({"step": "stateful", "index": positions[node.name]})
            break
        if isinstance(node, ir.SourceNode):
            chain.append({"step": "source"})
            break
        step = _KEY_STEPS.get(type(node))
        if step is not None:
            chain.append({"step": step[0], "fn": function_identity(getattr(node, step[1]))})
        if len(node.parents) != 1:
            # A merge keys like its inputs: inputs keyed alike count once (merging in another
            # stream keyed the same way is no re-keying), in a stable order.
            inputs = {json.dumps(c, sort_keys=True): c for c in (_key_chain(topology, p, positions)
                                                                 for p in node.parents)}
            if len(inputs) == 1:
                chain.extend(reversed(next(iter(inputs.values()))))
            else:
                chain.append({"step": "merge", "inputs": [inputs[k] for k in sorted(inputs)]})
            break
        node = topology.node(node.parents[0])
    return chain[::-1]


def _kind(node: ir.Node) -> str:
    if isinstance(node, ir.CogroupAggregateNode):
        return "cogroup"
    agg = getattr(node, "agg", None)
    return {ir.CountAgg: "count", ir.ReduceAgg: "reduce", ir.AggregateAgg: "aggregate"}.get(
        type(agg), type(node).__name__)


def _versioned_kind(topology: Topology, node: ir.Node, kind: str) -> str:
    """``kind``, marked for a versioned table and a stream–table join against one (their state
    holds versions, and a grace join's buffered records): a checkpoint of the other kind cannot
    continue. Other operators keep their kind as before."""
    from streamsdsl.operators.descriptions import versioned_retention

    if getattr(node, "history_retention_ms", None) is not None:
        return f"{kind} (versioned)"
    if isinstance(node, ir.StreamTableJoinNode) and versioned_retention(topology, node.parents[1]) is not None:
        return f"{kind} (versioned{', grace' if node.grace_ms is not None else ''})"
    return kind


def _backend(choice: Any) -> str | None:
    """``jvm``, ``python`` or ``native``: the backend of the compiler's choice (None: not reported)."""
    return None if choice is None else str(choice.backend.value)


def _serde(serde: Any) -> str:
    return "default" if serde is None else repr(serde)


def topology_fingerprint(topology: Topology, operators: Mapping[str, Any] | None = None) -> Fingerprint:
    """The fingerprint of ``topology``'s stateful part.

    Parameters
    ----------
    topology : Topology
        From ``StreamsBuilder.build()``.
    operators : mapping, optional
        Which operator runs each stateful node (``{node name: OperatorChoice}``, as
        `streamsdsl.compiler.CompiledTopology.operators` holds it); without it the
        ``backend`` of every operator is None (not compared).

    Examples
    --------
    >>> from streamsdsl import StreamsBuilder, TimeWindows
    >>> b = StreamsBuilder()
    >>> b.stream("clicks").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(60_000)).count() \\
    ...     .to_stream().to("counts")
    >>> [op["kind"] for op in topology_fingerprint(b.build()).operators]
    ['count']
    >>> topology_fingerprint(b.build()).operators[0]["windows"]
    'TimeWindows(size=60000ms, advance=60000ms, grace=0ms)'
    """
    operators = operators or {}
    # a foreign-key join keeps state (its subscriptions, both tables' values) with no result store
    stateful = [n for n in topology.nodes if n.stores or isinstance(n, ir.ForeignKeyJoinNode)]
    positions = {n.name: i for i, n in enumerate(stateful)}
    ops = []
    for node in stateful:
        windows = getattr(node, "windows", None)
        emit = getattr(node, "emit", None)
        inputs = node.parents
        ops.append({
            "name": node.name,
            "kind": _versioned_kind(topology, node, _kind(node)),
            "store": ", ".join(node.stores) or getattr(node, "subscription_store", ""),
            "windows": None if windows is None else repr(windows),
            "emit": repr(emit or EmitStrategy.on_window_update()),
            "serdes": {"key": _serde(getattr(node, "key_serde", None)),
                       "value": _serde(getattr(node, "value_serde", None))},
            "inputs": len(inputs),
            "backend": _backend(operators.get(node.name)),
            "key": [_key_chain(topology, p, positions) for p in inputs],
        })
    return Fingerprint(operators=tuple(ops), python=_python(),
                       sources=tuple(tuple(s.topics) if s.pattern is None else (f"re.compile({s.pattern.pattern!r})",)
                                     for s in topology.sources))


@attrs.frozen
class Fingerprint:
    """The stateful part of a topology (`topology_fingerprint`), as stored beside a checkpoint.

    ``operators`` holds one dict per stateful operator (see the module docstring); ``python``
    is the ``major.minor`` version of the Python that computed the function digests;
    ``sources`` the topics of each source node (one Spark source each; None when unknown).
    """

    operators: tuple[dict[str, Any], ...]
    python: str = attrs.field(factory=_python)
    format: int = FORMAT
    sources: tuple[tuple[str, ...], ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON document stored with the checkpoint."""
        from streamsdsl import __version__

        return {"format": self.format, "python": self.python, "streamsdsl": __version__,
                "sources": None if self.sources is None else [list(t) for t in self.sources],
                "stateful_operators": list(self.operators)}

    @classmethod
    def from_json(cls, data: Any) -> Fingerprint:
        """Read a stored document; raises ValueError when it is not one (or of a newer format)."""
        if not isinstance(data, dict) or not isinstance(data.get("format"), int):
            raise ValueError("not a streamsdsl topology fingerprint (no 'format')")
        if data["format"] > FORMAT:
            raise ValueError(f"written in format {data['format']} by a newer streamsdsl (this one reads {FORMAT})")
        ops = data.get("stateful_operators")
        if not isinstance(ops, list) or not all(isinstance(o, dict) for o in ops):
            raise ValueError("'stateful_operators' is not a list of objects")
        sources = data.get("sources")
        if sources is not None and not (isinstance(sources, list) and all(isinstance(t, list) for t in sources)):
            raise ValueError("'sources' is not a list of topic lists")
        return cls(operators=tuple(ops), python=str(data.get("python", "")), format=int(data["format"]),
                   sources=None if sources is None else tuple(tuple(str(x) for x in t) for t in sources))


# -- rendering and comparing -----------------------------------------------------------------------
def _render_fn(identity: Mapping[str, str], with_code: bool) -> str:
    name = identity.get("name", "?")
    return f"{name} #{identity.get('code', '?')[:8]}" if with_code and not name.startswith("Column<") else name


def _render_chain(chain: list[Any], with_code: bool = True) -> str:
    parts = []
    for step in chain:
        kind = step.get("step")
        if kind == "source":
            parts.append("the source key")
        elif kind == "stateful":
            parts.append(f"the key of stateful operator {step.get('index', 0) + 1}")
        elif kind == "merge":
            parts.append("merge(" + " | ".join(_render_chain(c, with_code) for c in step.get("inputs", [])) + ")")
        else:
            parts.append(f"{kind}({_render_fn(step.get('fn', {}), with_code)})")
    return f"[{', '.join(parts)}]"


def describe_key(op: Mapping[str, Any], with_code: bool = True) -> str:
    """How a fingerprinted operator's key is computed, per input, as text.

    Examples
    --------
    >>> describe_key({"key": [[{"step": "source"}, {"step": "select_key", "fn": {"name": "f", "code": "0123456789"}}]]})
    '[the source key, select_key(f #01234567)]'
    """
    return "; ".join(f"input {i + 1}: {_render_chain(c, with_code)}" if len(op["key"]) > 1
                     else _render_chain(c, with_code) for i, c in enumerate(op["key"]))


def _comparable(value: Any, with_code: bool) -> Any:
    """A key chain as compared: functions by their code digest (``with_code``) or, across
    Python versions, by their qualified name."""
    if isinstance(value, dict):
        if "code" in value and "name" in value:
            return value["code"] if with_code else value["name"]
        return {k: _comparable(v, with_code) for k, v in value.items()}
    if isinstance(value, list):
        return [_comparable(v, with_code) for v in value]
    return value


@attrs.frozen
class Change:
    """One incompatible change of a stateful operator: ``operator`` names it (``name (kind)``),
    ``what`` is the field (``windows``, ``emit strategy``, ...), ``old`` and ``new`` its values
    (``what`` is ``added`` or ``removed`` for a whole operator)."""

    operator: str
    what: str
    old: str = ""
    new: str = ""

    def __str__(self) -> str:
        if self.what in ("added", "removed"):
            return f"{self.operator}: {self.what}"
        return f"{self.operator}: {self.what} {self.old} -> {self.new}"


def _label(op: Mapping[str, Any]) -> str:
    return f"{op.get('name')} ({op.get('kind')})"


def _none(value: Any) -> str:
    return "none" if value is None else str(value)


def _compare(old: Mapping[str, Any], new: Mapping[str, Any], with_code: bool) -> list[Change]:
    """The changes between two operators at the same position."""
    label = _label(new)
    changes = []
    if old.get("kind") != new.get("kind"):
        changes.append(Change(label, "aggregation", _none(old.get("kind")), _none(new.get("kind"))))
    if old.get("inputs") != new.get("inputs"):
        changes.append(Change(label, "inputs", _none(old.get("inputs")), _none(new.get("inputs"))))
    for field, what in (("windows", "windows"), ("emit", "emit strategy")):
        if old.get(field) != new.get(field):
            changes.append(Change(label, what, _none(old.get(field)), _none(new.get(field))))
    if old.get("serdes") != new.get("serdes"):
        def serdes(op: Mapping[str, Any]) -> str:
            s = op.get("serdes") or {}
            return f"key {s.get('key')}, value {s.get('value')}"
        changes.append(Change(label, "serdes", serdes(old), serdes(new)))
    old_key, new_key = _comparable(old.get("key"), with_code), _comparable(new.get("key"), with_code)
    if old_key != new_key and old.get("inputs") == new.get("inputs"):
        changes.append(Change(label, "key", describe_key(old, with_code), describe_key(new, with_code)))
    # A changed operator is reported only when nothing else changed: a new window, say, often
    # moves an aggregation from Spark's native aggregation to a stateful processor.
    if not changes and old.get("backend") is not None and new.get("backend") is not None \
            and old["backend"] != new["backend"]:
        changes.append(Change(label, "operator", old["backend"], new["backend"]))
    return changes


def _signature(op: Mapping[str, Any], with_code: bool) -> str:
    """What must be equal for two operators to be the same one (names excluded)."""
    fields = {k: op.get(k) for k in ("kind", "windows", "emit", "serdes", "inputs")}
    fields["key"] = _comparable(op.get("key"), with_code)
    return json.dumps(fields, sort_keys=True)


def diff(old: Fingerprint, new: Fingerprint) -> list[Change]:
    """The incompatible changes from ``old`` (stored with the checkpoint) to ``new``.

    Operators are matched by position (Spark's order); an added or removed operator is found
    by aligning the two lists. Names and store names are not compared. A changed number of
    source nodes is a change too (Spark keeps one offset per source and cannot continue with
    another number). An empty list means the new topology can continue the checkpoint.

    Examples
    --------
    >>> from streamsdsl import EmitStrategy, StreamsBuilder, TimeWindows
    >>> def build(emit):
    ...     b = StreamsBuilder()
    ...     w = b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
    ...     w.emit_strategy(emit).count().to_stream().to("out")
    ...     return topology_fingerprint(b.build())
    >>> [str(c) for c in diff(build(EmitStrategy.on_window_update()), build(EmitStrategy.on_window_close()))]
    ['KSTREAM-AGGREGATE-0000000002 (count): emit strategy EmitStrategy.on_window_update() -> EmitStrategy.on_window_close()']
    """
    with_code = old.python == new.python
    a = [_signature(o, with_code) for o in old.operators]
    b = [_signature(o, with_code) for o in new.operators]
    changes: list[Change] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            for o, n in zip(old.operators[i1:i2], new.operators[j1:j2]):
                changes += [c for c in _compare(o, n, with_code) if c.what == "operator"]
            continue
        pairs = min(i2 - i1, j2 - j1)
        for o, n in zip(old.operators[i1:i1 + pairs], new.operators[j1:j1 + pairs]):
            changes += _compare(o, n, with_code)
        changes += [Change(_label(o), "removed") for o in old.operators[i1 + pairs:i2]]
        changes += [Change(_label(n), "added") for n in new.operators[j1 + pairs:j2]]
    if old.sources is not None and new.sources is not None and len(old.sources) != len(new.sources):
        changes.append(Change("the topology", "sources", _render_sources(old.sources), _render_sources(new.sources)))
    return changes


def _render_sources(sources: tuple[tuple[str, ...], ...]) -> str:
    return f"{len(sources)} ({', '.join('[' + ', '.join(t) + ']' for t in sources)})"
