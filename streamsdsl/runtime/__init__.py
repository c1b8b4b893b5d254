"""Running a compiled topology: the `KafkaStreams` application, the `TopologyTestDriver`, the
streaming query and its metrics, and the SparkSession (imports pyspark lazily)."""
