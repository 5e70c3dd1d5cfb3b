"""ddlbench's training benchmark: one timed loop shared by every framework and loader.

`import benchmarks` needs only torch; horovod, deepspeed and nvidia.dali are imported by their
adapter modules alone, when chosen.
"""
