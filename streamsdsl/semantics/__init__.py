"""The semantics core: Kafka Streams' per-record rules in plain Python (no Spark).

One `Windowing` protocol for every window kind — `SessionWindowing`, `TimeWindowing`,
`SlidingWindowing` and `Unwindowed` — and one record step (`record_step`) that the Spark
processors and the reference runs (`streamsdsl.semantics.reference`) both call.
"""

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.changes import ChangeBuffer
from streamsdsl.semantics.session import SessionWindowing
from streamsdsl.semantics.sliding import SlidingWindowing
from streamsdsl.semantics.timewindow import TimeWindowing
from streamsdsl.semantics.unwindowed import Unwindowed
from streamsdsl.semantics.windowing import KeyState, RecordStep, WindowAgg, Windowing, record_step

__all__ = [
    "AggFunctions", "ChangeBuffer", "KeyState", "RecordStep", "SessionWindowing", "SlidingWindowing", "TimeWindowing",
    "Unwindowed", "WindowAgg", "Windowing", "record_step",
]
