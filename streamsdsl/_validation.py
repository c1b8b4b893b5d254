"""Argument validation shared by the DSL, the window specifications and the IR (pure Python).

Two kinds of helpers live here: plain checks (`to_millis`, `validate_name`, ...) that the
fluent API calls on user arguments, and small attrs validators / field factories built on them
(`instance_of`, `names_tuple`, `duration_field`, ...) that frozen values and IR nodes declare
on their fields, so that no value is ever invalid however it was constructed.

User functions are checked when the topology is written: `require_callable` with
``check_arity`` tells a function that cannot take the arguments its shape names apart from one
whose signature cannot be known (accepted), and `require_arguments` names the argument a DSL call
left out (its parameters default to `REQUIRED` so that the DSL, not Python, reports it).

Every error names the argument, states the unit and, where there is one, the fix; every error
is an `InvalidArgumentError` (a ``ValueError``) or an `InvalidTypeError` (a ``TypeError``), or,
for a method asked of the wrong stage, `streamsdsl.errors.StageMethodError` (an ``AttributeError``).
"""

from __future__ import annotations

import functools
import inspect
import re
from datetime import timedelta
from typing import Any, Callable, Sequence

import attrs

from streamsdsl.errors import InvalidArgumentError, InvalidTypeError

#: Kafka Streams' legal characters for user-provided processor, store and topic names.
_NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")
MAX_NAME_LENGTH = 249

Duration = int | timedelta

#: What attrs passes a validator: the instance, the attribute and the (converted) value.
Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]



def _got(value: Any) -> str:
    return f"got {type(value).__name__}: {value!r}"


# --- plain checks -------------------------------------------------------------------------------


def to_millis(value: Any, arg: str, hint: str = "") -> int:
    """Convert an ``int`` (milliseconds) or ``timedelta`` to whole milliseconds.

    Raises
    ------
    InvalidTypeError
        If ``value`` is neither an ``int`` nor a ``timedelta`` (``bool`` is rejected too).

    Examples
    --------
    >>> to_millis(timedelta(seconds=2), "gap")
    2000
    >>> to_millis("2s", "gap")
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidTypeError: 'gap' must be an int (milliseconds) or a datetime.timedelta (got str: '2s').
    """
    if isinstance(value, bool) or not isinstance(value, (int, timedelta)):
        raise InvalidTypeError(
            f"'{arg}' must be an int (milliseconds) or a datetime.timedelta "
            f"({_got(value)}).{(' ' + hint) if hint else ''}"
        )
    if isinstance(value, timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        if micros % 1000:
            raise InvalidArgumentError(
                f"'{arg}' must be a whole number of milliseconds (got {value!r}). "
                "Round the timedelta to milliseconds."
            )
        return micros // 1000
    return int(value)


def epoch_millis(value: Any, arg: str) -> int:
    """Check a point in time: a non-negative ``int`` of epoch milliseconds.

    Examples
    --------
    >>> epoch_millis(-1, "timestamp")
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidArgumentError: 'timestamp' must be >= 0 ms (got -1).
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"'{arg}' must be an int (epoch milliseconds), got {value!r}.")
    if value < 0:
        raise InvalidArgumentError(f"'{arg}' must be >= 0 ms (got {value}).")
    return value


def validate_name(value: Any, arg: str = "name") -> str:
    """Validate a user-provided processor/store name as Kafka Streams does."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"'{arg}' must be a str ({_got(value)}).")
    if not value:
        raise InvalidArgumentError(f"'{arg}' must not be empty. Pass a name such as 'orders-count'.")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidArgumentError(
            f"'{arg}' is {len(value)} characters long; the limit is {MAX_NAME_LENGTH} characters."
        )
    if not _NAME_RE.match(value):
        raise InvalidArgumentError(
            f"'{arg}' {value!r} contains an illegal character; "
            "legal characters are ASCII letters, digits, '.', '_' and '-'."
        )
    return value


def validate_pattern(value: Any, arg: str = "topics") -> re.Pattern[str]:
    """Validate a topic pattern (Kafka Streams' ``stream(Pattern)``): a compiled ``str`` regular
    expression without compile flags (write them inline, ``(?i)``, which Java's regular
    expressions read too: Spark's own Kafka connector compiles the pattern in Java).

    Examples
    --------
    >>> validate_pattern(re.compile("orders-.*")).pattern
    'orders-.*'
    >>> validate_pattern(re.compile("orders-.*", re.IGNORECASE))
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidArgumentError: 'topics' is a pattern compiled with flags (re.IGNORECASE): ...
    """
    if not isinstance(value, re.Pattern):
        raise InvalidTypeError(f"'{arg}' must be a compiled regular expression, re.compile('orders-.*') ({_got(value)}).")
    if not isinstance(value.pattern, str):
        raise InvalidTypeError(
            f"'{arg}' must be a str pattern (got the bytes pattern {value.pattern!r}); write re.compile("
            f"{value.pattern.decode(errors='replace')!r}).")
    extra = value.flags & ~re.compile(value.pattern).flags  # flags given to compile(), not written inline
    if extra:
        names = re.RegexFlag(extra).name or str(extra)
        raise InvalidArgumentError(
            f"'{arg}' is a pattern compiled with flags (re.{names.replace('|', ' | re.')}): Spark's Kafka connector "
            "compiles the pattern as a Java regular expression, which receives no Python flags. Write them inline "
            f"instead, e.g. re.compile('(?i){value.pattern}') for re.IGNORECASE.")
    if not value.pattern:
        raise InvalidArgumentError(f"'{arg}' is an empty pattern; it would match no topic. Use e.g. re.compile('orders-.*').")
    return value


def refuse_pattern(value: Any, arg: str) -> None:
    """Raise `InvalidTypeError` for a regular expression where one topic is needed (a table,
    a sink): only `StreamsBuilder.stream` reads a pattern, as in Kafka Streams.

    Examples
    --------
    >>> refuse_pattern(re.compile("orders-.*"), "topic")
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidTypeError: 'topic' is a regular expression (re.compile('orders-.*')): ...
    """
    if isinstance(value, re.Pattern):
        raise InvalidTypeError(
            f"'{arg}' is a regular expression (re.compile({value.pattern!r})): only StreamsBuilder.stream() "
            "reads the topics a pattern matches (Kafka Streams' stream(Pattern)); here name one topic.")


def validate_topic(value: Any, arg: str = "topic") -> str:
    """Validate a Kafka topic name (same rule as processor names, '.' and '..' excluded)."""
    refuse_pattern(value, arg)
    name = validate_name(value, arg)
    if name in (".", ".."):
        raise InvalidArgumentError(f"'{arg}' cannot be '.' or '..'.")
    return name


def is_spark_column(value: Any) -> bool:
    """True if ``value`` is a pyspark ``Column`` (checked without importing pyspark)."""
    t = type(value)
    return t.__name__ == "Column" and t.__module__.startswith("pyspark.")


def require_callable(
    value: Any, arg: str, shape: str | Sequence[str], *, column_ok: bool = False, check_arity: bool = False
) -> str:
    """Raise a clear error unless ``value`` is callable (or a Spark Column when allowed); the shape
    it has.

    ``shape`` is one function shape such as ``"(key, value) -> bool"``, or several a DSL method
    accepts (Kafka's overloads: ``("(value) -> value", "(key, value) -> value")`` for a
    ``ValueMapper`` or a ``ValueMapperWithKey``). With ``check_arity``, ``value`` must also
    accept as many positional arguments as one of the shapes names (defaulted parameters and
    ``*args`` are fine), and the first shape it fits is returned; a callable whose signature
    cannot be known (``int``, ``max``) is accepted with the first shape.

    Examples
    --------
    >>> require_callable(lambda k: k > 0, "predicate", "(key, value) -> bool", check_arity=True)
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidTypeError: 'predicate' must accept 2 positional arguments (key, value); lambda k has 1 (k). Use lambda key, value: ...
    >>> require_callable(lambda k, v: v, "mapper", ("(value) -> value", "(key, value) -> value"), check_arity=True)
    '(key, value) -> value'
    >>> require_callable(lambda: 1, "mapper", ("(value) -> value", "(key, value) -> value"), check_arity=True)
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidTypeError: 'mapper' must accept 1 positional argument (value) or 2 (key, value); lambda has 0 (). Use lambda value: ... or lambda key, value: ...
    """
    shapes = tuple(shape) if isinstance(shape, (tuple, list)) else (str(shape),)
    described = " or ".join(shapes)
    if is_spark_column(value):
        if column_ok:
            return shapes[0]
        raise InvalidTypeError(
            f"'{arg}' does not accept a pyspark Column here; pass a Python callable of shape {described}."
        )
    if not callable(value):
        allowed = "a callable or a pyspark Column" if column_ok else "a callable"
        raise InvalidTypeError(f"'{arg}' must be {allowed} of shape {described} ({_got(value)}).")
    if not check_arity:
        return shapes[0]
    wanted_params = [shape_params(s) for s in shapes]
    if any(params is None for params in wanted_params):
        return shapes[0]
    listed = [params for params in wanted_params if params is not None]
    problems = [arity_problem(value, params) for params in listed]
    for fits, problem in zip(shapes, problems):
        if problem is None:
            return fits
    sig = _signature(value)
    too_many = sig is not None and _required_count(sig) > len(listed[-1])
    problem = problems[-1] if too_many else problems[0]
    raise InvalidTypeError(f"'{arg}' must accept {_wanted(listed)}; {problem}. {_arity_fix(value, listed, shapes)}")


def _wanted(listed: Sequence[Sequence[str]]) -> str:
    """``2 positional arguments (key, value)``; ``1 positional argument (value) or 2 (key, value)``."""
    parts = []
    for i, params in enumerate(listed):
        n = len(params)
        if n == 0:
            parts.append("no arguments")
        elif i == 0:
            parts.append(f"{n} positional argument{'s' if n > 1 else ''} ({', '.join(params)})")
        else:
            parts.append(f"{n} ({', '.join(params)})")
    return " or ".join(parts)


def shape_params(shape: str) -> tuple[str, ...] | None:
    """The parameter names of a function shape such as ``"(key, value) -> bool"`` (None if the
    shape does not start with a parameter list).

    Examples
    --------
    >>> shape_params("(key, value) -> bool"), shape_params("() -> aggregate")
    (('key', 'value'), ())
    """
    match = re.match(r"\(([^)]*)\)", shape)
    if match is None:
        return None
    return tuple(p.strip() for p in match.group(1).split(",") if p.strip())


def _signature(fn: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # builtins and C types without a signature: not knowable
        return None


def callable_label(fn: Any, sig: inspect.Signature | None = None) -> str:
    """How messages name a user function: ``lambda k, v``, ``is_big``, ``Checker.check``,
    ``functools.partial(add)``, ``Adder.__call__`` (a callable object)."""
    if isinstance(fn, functools.partial):
        return f"functools.partial({callable_label(fn.func)})"
    name = getattr(fn, "__qualname__", None)
    if name is None:
        return f"{type(fn).__qualname__}.__call__"
    if getattr(fn, "__name__", None) == "<lambda>":
        sig = sig or _signature(fn)
        inner = str(sig)[1:-1] if sig is not None else ""
        return f"lambda {inner}" if inner else "lambda"
    return str(name).rsplit(".<locals>.", 1)[-1]


def _names(params: Sequence[inspect.Parameter]) -> str:
    return ", ".join(p.name for p in params)


def arity_problem(fn: Any, params: Sequence[str]) -> str | None:
    """Why ``fn`` cannot be called with ``len(params)`` positional arguments, e.g.
    ``"lambda k has 1 (k)"``; None when it can, or when its signature cannot be known."""
    sig = _signature(fn)
    if sig is None:
        return None
    kinds = inspect.Parameter
    every = list(sig.parameters.values())
    positional = [p for p in every if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is kinds.empty]
    keyword_only = [p for p in every if p.kind is kinds.KEYWORD_ONLY and p.default is kinds.empty]
    label = callable_label(fn, sig)
    if len(required) > len(params):
        return f"{label} has {len(required)} required ({_names(required)})"
    if len(positional) < len(params) and not any(p.kind is kinds.VAR_POSITIONAL for p in every):
        return f"{label} has {len(positional)} ({_names(positional)})"
    if keyword_only:
        return f"{label} has required keyword-only ({_names(keyword_only)}), which the DSL never passes"
    return None


def _required_count(sig: inspect.Signature) -> int:
    kinds = inspect.Parameter
    return sum(1 for p in sig.parameters.values()
               if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD) and p.default is kinds.empty)


def _arity_fix(fn: Any, listed: Sequence[Sequence[str]], shapes: Sequence[str]) -> str:
    if getattr(fn, "__name__", None) == "<lambda>":
        return "Use " + " or ".join(f"lambda{' ' if params else ''}{', '.join(params)}: ..." for params in listed)
    if inspect.isfunction(fn):
        return "Use " + " or ".join(f"def {fn.__name__}({', '.join(params)}): ..." for params in listed)
    return f"Pass a callable of shape {' or '.join(shapes)}."


class _Required:
    """The type of `REQUIRED`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<required>"


#: The default of a DSL parameter that must be given: the DSL, not Python, then reports it
#: missing, with `require_arguments`, naming the argument the user actually left out.
REQUIRED: Any = _Required()


def require_arguments(method: str, example: str, *args: tuple[str, Any, str]) -> None:
    """Raise a clear error when a DSL call left out a required argument (one still `REQUIRED`).

    ``args`` are ``(name, value, shape)`` in signature order; ``example`` is a complete call.
    When a function given for one argument has the shape of a later one (an aggregator given
    first), the message says so: the earlier argument is the one that was left out.

    Examples
    --------
    >>> require_arguments("aggregate", "aggregate(lambda: 0, lambda key, value, agg: agg + 1)",
    ...                   ("initializer", lambda k, v, a: a, "() -> aggregate"),
    ...                   ("aggregator", REQUIRED, "(key, value, aggregate) -> aggregate"))
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidTypeError: aggregate() needs initializer and aggregator: aggregate(initializer, aggregator), e.g. aggregate(lambda: 0, lambda key, value, agg: agg + 1). The initializer given, lambda k, v, a, looks like the aggregator; the initializer comes first.
    """
    missing = [name for name, value, _ in args if value is REQUIRED]
    if not missing:
        return
    names = [name for name, _, _ in args]
    message = f"{method}() needs {_listing(names)}: {method}({', '.join(names)}), e.g. {example}."
    if len(missing) < len(args):
        message += " " + (_misplaced(args) or f"Missing: {_listing([repr(m) for m in missing])}.")
    raise InvalidTypeError(message)


def _listing(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join(filter(None, (", ".join(items[:-1]), items[-1])))


def _misplaced(args: Sequence[tuple[str, Any, str]]) -> str | None:
    """The first given function that does not fit its own argument but fits a later one."""
    for i, (name, value, shape) in enumerate(args):
        own = shape_params(shape)  # None: the argument is not a function
        fits_own = own is not None and arity_problem(value, own) is None
        if value is REQUIRED or not callable(value) or fits_own:
            continue
        for later, _, later_shape in args[i + 1 :]:
            fits = shape_params(later_shape)
            if fits is not None and arity_problem(value, fits) is None:
                return (
                    f"The {name} given, {callable_label(value)}, looks like the {later}; "
                    f"the {name} comes first."
                )
    return None


def fn_name(fn: Callable[..., Any] | Any) -> str:
    """A short, stable label for a user function or Column (used by repr only)."""
    if is_spark_column(fn):
        return f"Column<{fn}>"
    return getattr(fn, "__qualname__", None) or type(fn).__name__


# --- attrs validators and fields ----------------------------------------------------------------


def instance_of(*types: type, optional: bool = False, hint: str = "") -> Validator:
    """An attrs validator: the value is an instance of one of ``types`` (or None if ``optional``).

    Examples
    --------
    >>> @attrs.frozen
    ... class Box:
    ...     size: int = attrs.field(validator=instance_of(int, hint="Pass a whole number."))
    >>> Box("3")
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidTypeError: 'size' must be int (got str: '3'). Pass a whole number.
    """
    allowed = " or ".join([t.__name__ for t in types] + (["None"] if optional else []))
    tail = f" {hint}" if hint else ""

    def check(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is None and optional:
            return
        # bool is an int subclass: accept it only where bool itself is allowed
        if isinstance(value, types) and (bool in types or not isinstance(value, bool)):
            return
        raise InvalidTypeError(f"'{attribute.name}' must be {allowed} ({_got(value)}).{tail}")

    return check


def tuple_of(*types: type, min_len: int = 0) -> Validator:
    """An attrs validator: a tuple (not a list) of at least ``min_len`` instances of ``types``."""
    allowed = " or ".join(t.__name__ for t in types)

    def check(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        arg = attribute.name
        if not isinstance(value, tuple):
            raise InvalidTypeError(f"'{arg}' must be a tuple of {allowed} ({_got(value)}).")
        for i, item in enumerate(value):
            if not isinstance(item, types):
                raise InvalidTypeError(f"'{arg}[{i}]' must be {allowed} ({_got(item)}).")
        _require_len(arg, value, min_len)

    return check


def _require_len(arg: str, value: tuple[Any, ...], min_len: int) -> None:
    if len(value) < min_len:
        raise InvalidArgumentError(f"'{arg}' must hold at least {min_len} item(s) (got {value!r}).")


def names_tuple(min_len: int = 0, *, topics: bool = False) -> Validator:
    """An attrs validator: a tuple of Kafka-legal names (topic names when ``topics``)."""
    check_one = validate_topic if topics else validate_name

    def check(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        arg = attribute.name
        if not isinstance(value, tuple):
            raise InvalidTypeError(f"'{arg}' must be a tuple of str ({_got(value)}).")
        for i, item in enumerate(value):
            check_one(item, f"{arg}[{i}]")
        _require_len(arg, value, min_len)

    return check


def is_name(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """An attrs validator: a Kafka-legal processor or store name (`validate_name`)."""
    validate_name(value, attribute.name)


def source_pattern(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """An attrs validator: a source's topic pattern (`validate_pattern`), given instead of its
    ``topics`` (exactly one of the two)."""
    if value is not None:
        validate_pattern(value, attribute.name)
    if bool(inst.topics) == (value is not None):
        raise InvalidArgumentError(
            f"Source {inst.name} must read topics or a pattern, not both or neither "
            f"(topics={inst.topics!r}, pattern={value!r}).")


def is_topic(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """An attrs validator: a Kafka-legal topic name (`validate_topic`)."""
    validate_topic(value, attribute.name)


def is_epoch_millis(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """An attrs validator: a point in time in epoch milliseconds (`epoch_millis`)."""
    epoch_millis(value, attribute.name)


def millis(arg: str) -> Callable[[Any], int]:
    """An attrs converter: an ``int`` (ms) or ``timedelta`` to int milliseconds (`to_millis`)."""
    return lambda value: to_millis(value, arg)


def duration_field(arg: str, *, positive: bool, fix: str, **kwargs: Any) -> Any:
    """An attrs field holding a duration as int milliseconds.

    It accepts an ``int`` (ms) or a ``timedelta``, and must be ``> 0`` ms (``positive``) or
    ``>= 0`` ms. ``arg`` is the user-facing argument name the messages use; ``fix`` says what
    to write instead.
    """
    bound = "> 0" if positive else ">= 0"

    def check(inst: Any, attribute: attrs.Attribute[Any], value: int) -> None:
        if value < 0 or (positive and value == 0):
            raise InvalidArgumentError(f"'{arg}' must be {bound} ms (got {value}). {fix}")

    return attrs.field(converter=millis(arg), validator=check, **kwargs)


def one_of(choices: tuple[str, ...], what: str) -> Callable[[Any, Any, Any], None]:
    """An attrs validator: the value is one of ``choices`` (``what`` names the object in the message)."""
    listed = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}"

    def check(inst: Any, attribute: Any, value: Any) -> None:
        if value not in choices:
            raise InvalidArgumentError(f"'{attribute.name}' of a {what} must be {listed} (got {value!r}).")

    return check
