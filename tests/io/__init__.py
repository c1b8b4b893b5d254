"""Tests of the Kafka I/O layer that need neither a broker nor a SparkSession."""
