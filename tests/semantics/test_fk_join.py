"""The foreign-key join's kernel (`streamsdsl.semantics.fk_join`) on Kafka's own unit cases:
SubscriptionSendProcessorSupplierTest (which subscriptions a left change sends, to which foreign
key, with which instruction and hash), SubscriptionJoinProcessorSupplierTest /
ForeignTableJoinProcessorSupplierTests (the responses and their timestamps) and
ResponseJoinProcessorSupplierTest (stale responses, tombstones, the left join's null)."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl.semantics.fk_join import (
    DELETE_KEY_AND_PROPAGATE,
    DELETE_KEY_NO_PROPAGATE,
    DROP_NULL_FOREIGN_KEY,
    DROP_STALE_RESPONSE,
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE,
    PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE,
    FkJoinSpec,
    ForeignState,
    ResolveState,
    Response,
    Subscription,
    fk_foreign_step,
    fk_resolve_step,
    fk_send_step,
    fk_subscription_step,
)
from streamsdsl.semantics.tables import Change, KeyedChange, TableValue


def value(fk: str | None) -> dict[str, Any]:
    """Kafka's ``LeftValue(fk)``."""
    return {"fk": fk}


def extractor(key: Any, v: dict[str, Any]) -> Any:
    return v["fk"]


V1, V2, VNULL = value("fk1"), value("fk2"), value(None)

#: (Kafka test, kind, old value, new value, [(foreign key, instruction, hashed value)], drop)
SEND_CASES = [
    ("leftJoinShouldPropagateNewPrimaryKeyWithNonNullFK", "left", None, V1,
     [("fk1", PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, V1)], None),
    ("leftJoinShouldPropagateNewPrimaryKeyWithNullFK", "left", None, VNULL,
     [(None, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, VNULL)], None),
    ("leftJoinShouldPropagateChangeOfFKFromNonNullToNonNullValue", "left", V1, V2,
     [("fk1", DELETE_KEY_AND_PROPAGATE, V2), ("fk2", PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, V2)], None),
    ("leftJoinShouldPropagateNewRecordOfUnchangedFK", "left", V1, V1,
     [("fk1", PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, V1)], None),
    ("leftJoinShouldPropagateChangeOfFKFromNonNullToNullValue", "left", V1, VNULL,
     [("fk1", DELETE_KEY_AND_PROPAGATE, VNULL), (None, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, VNULL)], None),
    ("leftJoinShouldPropagateChangeFromNullFKToNonNullFKValue", "left", VNULL, V1,
     [("fk1", PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, V1)], None),
    ("leftJoinShouldPropagateChangeFromNullFKToNullFKValue", "left", VNULL, VNULL,
     [(None, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, VNULL)], None),
    ("leftJoinShouldPropagateDeletionOfAPrimaryKey", "left", V1, None,
     [("fk1", DELETE_KEY_AND_PROPAGATE, None), (None, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, None)], None),
    ("leftJoinShouldPropagateDeletionOfAPrimaryKeyThatHadNullFK", "left", VNULL, None,
     [(None, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, None)], None),
    ("leftJoinShouldPropagateNothingWhenOldAndNewLeftValueIsNull", "left", None, None, [], None),
    ("innerJoinShouldPropagateNewPrimaryKey", "inner", None, V1,
     [("fk1", PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, V1)], None),
    ("innerJoinShouldNotPropagateNewPrimaryKeyWithNullFK", "inner", None, VNULL, [], DROP_NULL_FOREIGN_KEY),
    ("innerJoinShouldDeleteOldAndPropagateNewFK", "inner", V1, V2,
     [("fk1", DELETE_KEY_NO_PROPAGATE, V2), ("fk2", PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, V2)], None),
    ("innerJoinShouldPropagateNothingWhenOldAndNewFKIsNull", "inner", VNULL, VNULL, [], DROP_NULL_FOREIGN_KEY),
    ("innerJoinShouldPropagateDeletionOfPrimaryKey", "inner", V1, None, [("fk1", DELETE_KEY_AND_PROPAGATE, None)],
     None),
    ("innerJoinShouldPropagateNothingWhenOldAndNewLeftValueIsNull", "inner", None, None, [], None),
]


class TestSubscriptionSend:
    @pytest.mark.parametrize(("case", "kind", "old", "new", "sent", "dropped"), SEND_CASES,
                             ids=[c[0] for c in SEND_CASES])
    def test_kafka_case(self, case: str, kind: str, old: Any, new: Any, sent: list[Any], dropped: str | None) -> None:
        """SubscriptionSendProcessorSupplierTest: a left change ``Change(new, old)`` sends these
        subscriptions, in order (the hash of the new value; ``None`` for a delete), or drops."""
        state = None if old is None else TableValue(old, 0)
        step = fk_send_step(FkJoinSpec(kind), state, "pk", new, 0, extractor)  # type: ignore[arg-type]
        assert [(s.foreign_key, s.instruction, s.value) for s in step.subscriptions] == sent
        assert all(s.key == "pk" and s.timestamp == 0 for s in step.subscriptions)
        assert step.dropped == dropped
        assert step.state == (None if new is None else TableValue(new, 0))


class TestSubscriptionJoin:
    def test_responses_by_instruction(self) -> None:
        """SubscriptionJoinProcessorSupplierTest: with a right value, every propagating
        instruction answers with it at the later timestamp; without one, only
        PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE and DELETE_KEY_AND_PROPAGATE answer (no right value);
        DELETE_KEY_NO_PROPAGATE never does; deletes unsubscribe."""
        right = ForeignState(TableValue("rv", 7))

        def answer(state: ForeignState, instruction: str) -> Any:
            return fk_subscription_step(state, Subscription("fk", instruction, "pk", "lv", 5))

        assert answer(right, PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)[1] == Response("pk", "lv", "rv", 7)
        assert answer(right, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)[1] == Response("pk", "lv", "rv", 7)
        assert answer(right, DELETE_KEY_AND_PROPAGATE)[1] == Response("pk", "lv", None, 7)
        assert answer(right, DELETE_KEY_NO_PROPAGATE)[1] is None
        empty = ForeignState()
        assert answer(empty, PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)[1] is None
        assert answer(empty, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)[1] == Response("pk", "lv", None, 5)
        subscribed, _ = answer(empty, PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)
        assert subscribed.subscribers == (("pk", "lv", 5),)
        assert answer(subscribed, DELETE_KEY_NO_PROPAGATE)[0].subscribers == ()

    def test_null_foreign_key_is_answered_and_not_stored(self) -> None:
        """SubscriptionReceiveProcessorSupplier: a None foreign key (a left join's) is answered
        without a right value under the subscription's timestamp, and nothing is stored."""
        state, response = fk_subscription_step(None, Subscription(None, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE,
                                                                  "pk", "lv", 3))
        assert (state, response) == (ForeignState(), Response("pk", "lv", None, 3))


class TestForeignTableJoin:
    def test_every_subscriber_in_key_bytes_order_with_the_right_timestamp(self) -> None:
        """ForeignTableJoinProcessorSupplierTests: a right update answers every subscriber of
        its key (the prefix scan's order: serialized primary keys) with its new value (a delete:
        None), under the right record's timestamp; a delete of an absent right key does nothing."""
        state = ForeignState()
        for pk in ("pk2", "pk1", "pk10"):
            state, _ = fk_subscription_step(state, Subscription("fk", PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, pk, pk, 100))
        state, responses, _ = fk_foreign_step(FkJoinSpec("inner"), state, "fk", "rv", 5)
        assert [(r.key, r.foreign, r.timestamp) for r in responses] == [("pk1", "rv", 5), ("pk10", "rv", 5),
                                                                        ("pk2", "rv", 5)]
        _, responses, _ = fk_foreign_step(FkJoinSpec("inner"), state, "fk", None, 6)
        assert [(r.key, r.foreign, r.timestamp) for r in responses] == [("pk1", None, 6), ("pk10", None, 6),
                                                                        ("pk2", None, 6)]
        assert fk_foreign_step(FkJoinSpec("inner"), ForeignState(), "fk", None, 6)[1] == ()

    def test_null_key_is_dropped(self) -> None:
        """A right record with a None key is dropped (the right table's source)."""
        assert fk_foreign_step(FkJoinSpec("inner"), None, None, "rv", 1)[2] == "null_key"


def pair(left: Any, right: Any) -> str:
    return f"{left}+{right}"


class TestResponseJoin:
    @pytest.mark.parametrize(("kind", "current", "response", "result"), [
        # shouldNotForwardWhenHashDoesNotMatch
        ("inner", "lv2", Response("pk", "lv1", "rv", 1), DROP_STALE_RESPONSE),
        # shouldIgnoreUpdateWhenLeftHasBecomeNull: the response was made for a value the key no longer has
        ("inner", None, Response("pk", "lv1", "rv", 1), DROP_STALE_RESPONSE),
        # shouldForwardWhenHashMatches
        ("inner", "lv1", Response("pk", "lv1", "rv", 1), "lv1+rv"),
        # shouldEmitTombstoneForInnerJoinWhenRightIsNull
        ("inner", "lv1", Response("pk", "lv1", None, 1), None),
        # shouldEmitResultForLeftJoinWhenRightIsNull
        ("left", "lv1", Response("pk", "lv1", None, 1), "lv1+None"),
        # shouldEmitTombstoneForLeftJoinWhenRightIsNullAndLeftIsNull
        ("left", None, Response("pk", None, None, 1), None),
    ])
    def test_kafka_case(self, kind: str, current: Any, response: Response, result: Any) -> None:
        """ResponseJoinProcessorSupplierTest: a response made for another value than the key's
        current one is stale (dropped and counted); else the joiner's result, or a tombstone."""
        state = ResolveState(None if current is None else TableValue(current, 0))
        _, output, dropped = fk_resolve_step(FkJoinSpec(kind), state, response, pair)  # type: ignore[arg-type]
        if result == DROP_STALE_RESPONSE:
            assert (output, dropped) == (None, DROP_STALE_RESPONSE)
        else:
            assert (output, dropped) == (KeyedChange("pk", Change(result), 1), None)

    def test_materialized_result_does_not_forward_a_delete_of_an_absent_row(self) -> None:
        """A materialized result (a store with a record cache) forwards no delete of a key it
        holds no row for, and holds each result with its timestamp."""
        spec = FkJoinSpec("inner", materialized=True)
        state = ResolveState(TableValue("lv", 0))
        state, output, _ = fk_resolve_step(spec, state, Response("pk", "lv", None, 1), pair)
        assert output is None
        state, output, _ = fk_resolve_step(spec, state, Response("pk", "lv", "rv", 2), pair)
        assert output is not None and state.result == ("lv+rv", 2)
        state, output, _ = fk_resolve_step(spec, state, Response("pk", "lv", None, 3), pair)
        assert output == KeyedChange("pk", Change(None), 3) and state.result is None
