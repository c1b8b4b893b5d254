"""A join's user function as the kernels call it: Kafka's ``ValueJoiner`` ``(left, right)`` or
``ValueJoinerWithKey`` ``(key, left, right)``.

Every join kernel takes a ``Joiner`` of two values; a with-key joiner is wrapped in
`JoinerWithKey`, which each kernel binds to the key of the record it joins (`for_key`) — the key
the joined record gets, read-only: the joiner receives it and cannot change it.
"""

from __future__ import annotations

from typing import Any, Callable, Union

import attrs

__all__ = ["Joiner", "JoinerWithKey", "for_key"]


@attrs.frozen
class JoinerWithKey:
    """A joiner of ``(key, left_value, right_value)`` (Kafka's ``ValueJoinerWithKey``)."""

    fn: Callable[[Any, Any, Any], Any]

    def bind(self, key: Any) -> Callable[[Any, Any], Any]:
        fn = self.fn
        return lambda left, right: fn(key, left, right)


#: (left_value, right_value) -> value, or a `JoinerWithKey`.
Joiner = Union[Callable[[Any, Any], Any], JoinerWithKey]


def for_key(joiner: Joiner, key: Any) -> Callable[[Any, Any], Any]:
    """``joiner`` as a function of the two values, for a record of ``key``.

    Examples
    --------
    >>> for_key(JoinerWithKey(lambda k, l, r: f"{k}:{l}+{r}"), "k")("a", "b")
    'k:a+b'
    >>> for_key(lambda l, r: f"{l}+{r}", "k")("a", "b")
    'a+b'
    """
    return joiner.bind(key) if isinstance(joiner, JoinerWithKey) else joiner
