"""The `ddlbench` command line: the top of the import graph (docs/architecture.md).

It imports the training package (benchmarks), the launchers and the analysis; none of them imports it.
"""
