"""What each IR node's operator runs, derived once from the IR, for both hosts: the Spark
compiler (`streamsdsl.compiler`) and the test driver's direct engine (`streamsdsl.direct`).
No pyspark here.

- `streamsdsl.operators.codecs`: how a stream's key is held between steps (by its serde, or
  as a window around it).
- `streamsdsl.operators.functions`: the window rule, Kafka Streams' functions and the serdes
  of each stateful node.
"""
