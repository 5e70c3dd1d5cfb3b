"""Realistic synthetic campaign logs (run directories as launchers/lifecycle/rank.py writes them) for tests, demos and
the analysis speed benchmark (`ddlbench synthetic-logs`): many ranks, many steps, failures, truncations, a
corrupt line, an unknown schema version, telemetry and commbench files (collectives, and the GPU tests' P2P
matrix and concurrent host-to-device copies).

- cells.py: a run to write (SynthCell) and the campaigns the command offers (small, bench, lr);
- timing.py: the per-rank, per-step phase times (the timing model, in its docstring);
- lr_study.py: a learning-rate study's lr, loss and evaluations, and its config;
- telemetry.py, commbench.py: telemetry_rank<R>.jsonl and commbench.json;
- campaign.py: write_campaign, the run directories themselves.
"""
