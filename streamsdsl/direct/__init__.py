"""The test driver's direct engine: a topology run in the test process, without Spark, on the
same kernels as the Spark operators (`streamsdsl.direct.engine.Run`)."""

from streamsdsl.direct.engine import Emitted, Run

__all__ = ["Emitted", "Run"]
