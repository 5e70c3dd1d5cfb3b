"""Logs -> tidy tables (load) -> metrics (pure) -> figures (plots) -> reports (report)."""
