"""The run directory's formats, one module each: which cell a run is (cell_identity), its files and records
(run_files), and summary.json (summary_schema). Its state and attic are the run's life: launchers/lifecycle/
rundir_state.py."""
