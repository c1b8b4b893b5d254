"""The user-facing DSL (pure Python, no pyspark): the fluent stages (`streamsdsl.dsl.api`),
their option objects, window specifications and serdes. Users import all of it from
``streamsdsl``."""
