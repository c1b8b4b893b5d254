"""Value objects: windows and emit strategies, serdes, join windows and join options.

Immutable and validated when constructed; they sit below the IR (`streamsdsl.ir` holds them in
its nodes) and the user API (`streamsdsl.dsl` builds with them), and import neither.
"""
