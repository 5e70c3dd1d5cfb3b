"""`ddlbench history`: every completed run of many campaigns (and sites) kept in one SQLite store, and what
happened to each cell over time.

- `store.py`: the store (its schema, the run's identity, the upsert) and the store read back as a DataFrame;
- `run_row.py`: one completed run directory -> its row (figures, marks, versions, settings outside the cell);
- `index.py`: a pass over the roots (in worker processes for many runs), each run upserted once;
- `trend.py`: per cell and campaign, the figures over time; the change-point rule (the run-to-run spread
  decides) and what differs between the two sides of a change; the CI check. Pure: DataFrame in, out;
- `figures.py`: a cell's throughput over time, its changes marked (drawing only);
- `page.py`: the HTML page, in the report's style.

docs/history.md: the schema, the rule, an example.
"""
