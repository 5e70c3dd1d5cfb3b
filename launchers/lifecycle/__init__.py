"""The run's life: who owns a run directory and whether it lives, the hang watchdog, the supervisor, node-local
staging, the node screen (preflight) and the doctor: everything that keeps a run honest on a cluster, apart from
the engine that trains (benchmarks/) and the argv that starts it (launchers/)."""
