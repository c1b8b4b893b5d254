"""The semantics core: Kafka Streams' per-record rules in plain Python (no Spark).

The Spark processors call these functions; the property tests run them on their own and
compare with what the compiled Spark plan produces.
"""

from streamsdsl.semantics.aggregation import AggFunctions, agg_functions
from streamsdsl.semantics.changes import ChangeBuffer
from streamsdsl.semantics.session import Session, SessionStep, session_step

__all__ = ["AggFunctions", "ChangeBuffer", "Session", "SessionStep", "agg_functions", "session_step"]
