"""Graph passes: small, named steps between shape inference and execution, and the plan they
write (plan.py) and the fused epilogue the executors carry out (epilogue.py).

One module per pass, named after it, with a docstring saying what it does and why:
fold_constants, eliminate_dead, eliminate_noops, fuse_attention, fuse_epilogues,
plan_precision. The memory planner's pass,
plan_memory, is its own package's (kuiper/memory/). Which passes run, and in which order, is
the graph's pipeline (kuiper/graph/pipeline.py).
"""
