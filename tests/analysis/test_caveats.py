"""What a cell's figures must be read with (analysis/caveats.py): oversubscribed ranks (meta.json) and a
diverged training (summary.json, or an older run's rank logs) are marked in `results`, in the report's
tables and in `compare`, each explained in one line under the table; `compare` names CPU ranks as
`results` does and prints repeat counts as integers; the utilisation and trace bars name CPU ranks and
say in their title what every bar shares. On synthetic logs."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

from analysis.campaign_analysis import CampaignAnalysis
from analysis.caveats import notes, short
from analysis.load import LogWarning, load_campaign
from analysis.palette import PAPER_RC
from analysis.report import assemble, format_compare
from analysis.results import format_results, results_table
from analysis.synthetic_logs.campaign import write_campaign
from analysis.synthetic_logs.cells import SynthCell
from tests.analysis.test_labels import on_cpu, tour

OVERSUBSCRIBED_LINE = (
    "oversubscribed: 2 ranks on 1 CPU: the ranks shared cores, so the step times measure the sharing as well as the "
    "training"
)
DIVERGED_LINE = "diverged: loss non-finite from step 3 (measured phase): the training diverged; the throughput stands"


def _edit(path: Path, **fields) -> None:
    data = json.loads(path.read_text())
    data.update(fields)
    path.write_text(json.dumps(data))


def marked_tour(root: Path) -> Path:
    """The CPU tour (native, synthetic x 1, 2 ranks) with native at 2 ranks oversubscribed (meta.json, as
    launchers/lifecycle/rank.py writes it on a 1-CPU host) and synthetic at 1 rank diverged from step 3 (summary.json)."""
    tour(root)
    for run in (root / "synth").iterdir():
        if "-native-" in run.name and "-g2-" in run.name:
            _edit(run / "meta.json", oversubscribed=True, host_ranks=2, host_cores=1)
        elif "-native-" in run.name:
            _edit(run / "meta.json", oversubscribed=False, host_ranks=1, host_cores=1)
        if "-synthetic-" in run.name and "-g1-" in run.name:
            _edit(run / "summary.json", nonfinite_loss_step=3, nonfinite_loss_phase="measured")
    return root


def test_results_marks_oversubscribed_and_diverged_cells_and_says_why_under_the_table(tmp_path):
    """Before: an oversubscribed cell read as any other, and a diverged one was named only by a Python
    warning (invisible in-process)."""
    root = marked_tour(tmp_path / "runs")
    table, excluded = results_table(root)
    marks = dict(zip(zip(table["loader"], table["ranks (CPU)"]), table["marks"].map(short)))
    assert marks == {
        ("native", 1): "",
        ("native", 2): "oversubscribed",
        ("synthetic", 1): "diverged",
        ("synthetic", 2): "",
    }
    text = format_results(table, excluded)
    lines = text.splitlines()
    assert OVERSUBSCRIBED_LINE in lines and DIVERGED_LINE in lines, text
    header = next(line for line in lines if "marks" in line)
    assert max(map(len, lines)) <= 120 and header.split()[-1] == "marks"
    # runs without marks: no column, no lines
    plain = tour(tmp_path / "plain")
    table, _ = results_table(plain)
    assert "marks" not in table and "oversubscribed" not in format_results(table, pd.DataFrame())


def test_a_cell_is_marked_where_any_repeat_is(tmp_path):
    """Two repeats of a cell, one oversubscribed, one diverged: the cell carries both marks, and the
    divergence says in how many repeats."""
    root = tour(tmp_path / "runs", repeats=2)
    for run in (root / "synth").iterdir():
        if "-native-" in run.name and "-g2-" in run.name and run.name.endswith("-r0"):
            _edit(run / "meta.json", oversubscribed=True, host_ranks=2, host_cores=1)
        if "-native-" in run.name and "-g2-" in run.name and run.name.endswith("-r1"):
            _edit(run / "summary.json", nonfinite_loss_step=0, nonfinite_loss_phase="warm-up")
    table, excluded = results_table(root)
    row = table[(table["loader"] == "native") & (table["ranks (CPU)"] == 2)].iloc[0]
    assert short(row["marks"]) == "oversubscribed, diverged"
    assert notes([row["marks"]])[1].startswith(
        "diverged: loss non-finite from step 0 (warm-up phase) in 1 of 2 repeats"
    )


def test_an_older_run_whose_rank_logs_hold_a_nonfinite_loss_is_marked_diverged(tmp_path):
    """A summary from before nonfinite_loss_step: the rank logs' NaN loss marks the cell all the same."""
    root = tour(tmp_path / "runs")
    run = next(r for r in (root / "synth").iterdir() if "-synthetic-" in r.name and "-g2-" in r.name)
    log = run / "rank0.jsonl"
    lines = log.read_text().splitlines()
    lines[10] = lines[10][:-1] + ',"loss":NaN}'
    log.write_text("\n".join(lines) + "\n")
    with pytest.warns(LogWarning, match="the training diverged"):
        table, excluded = results_table(root)
    row = table[(table["loader"] == "synthetic") & (table["ranks (CPU)"] == 2)].iloc[0]
    assert short(row["marks"]) == "diverged"
    assert "diverged: loss non-finite in the rank logs: the training diverged" in format_results(table, excluded)


def test_the_report_marks_its_tables_of_cells_and_says_why_under_the_first(tmp_path):
    root = marked_tour(tmp_path / "runs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        blocks, _ = assemble(load_campaign(root))
    marked = [k for k, b in enumerate(blocks) if b.kind == "table" and "marks" in b.content]
    assert len(marked) >= 2  # the throughput table and the shares of step time, at least
    first = blocks[marked[0]]
    assert "img/s" in first.content  # the README's words, not the column names (analysis/words.py)
    (size,) = [c for c in ("GPUs", "ranks (CPU)") if c in first.content]
    rows = dict(zip(zip(first.content["loader"], first.content[size]), first.content["marks"]))
    assert rows[("native", 2)] == "oversubscribed" and rows[("synthetic", 1)] == "diverged"
    assert rows[("native", 1)] == "" and rows[("synthetic", 2)] == ""
    under = blocks[marked[0] + 1]
    assert under.kind == "text" and under.content == f"{OVERSUBSCRIBED_LINE}\n\n{DIVERGED_LINE}"
    assert OVERSUBSCRIBED_LINE in blocks[marked[1]].note  # the others: in their definitions


def test_compare_names_cpu_ranks_marks_cells_and_counts_repeats_in_integers(tmp_path):
    """Before: compare headed CPU ranks world_size, printed a one-sided cell's repeats as 3.0 and said
    nothing of oversubscribed or diverged cells."""
    root = marked_tour(tmp_path / "runs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        analysis = CampaignAnalysis(root)
        table = analysis.compare(analysis, by=("loader", "native", "synthetic"))
    text = format_compare(table, threshold=0.05)
    header, *rows = text.splitlines()
    assert "ranks (CPU)" in header and "batch/rank" in header and "world_size" not in header
    assert "oversubscribed in A" in text and "diverged in B" in text
    assert OVERSUBSCRIBED_LINE in text.splitlines() and DIVERGED_LINE in text.splitlines()
    # a cell on one side only: its repeats an integer, the other side blank
    b = tmp_path / "b"
    cells = [SynthCell("ddp", "native", "resnet50", 1, 1, per_gpu_batch=32, repeat=r) for r in range(3)]
    cells.append(SynthCell("ddp", "native", "resnet50", 4, 1, per_gpu_batch=32))
    write_campaign(b, cells, steps=30, warmup_steps=5, commbench=False, campaign="b")
    on_cpu(b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        table = CampaignAnalysis(root).compare(CampaignAnalysis(b))
    text = format_compare(table, threshold=0.05)
    assert not re.search(r"\s[13]\.0\s", text), text  # before: 1.0 and 3.0 where the other side is blank
    assert set(table["num_repeats_b"].dropna()) <= {1, 3}


def test_utilisation_and_trace_bars_name_cpu_ranks_and_title_what_they_share(tmp_path):
    """Before: their labels came from tables without a device column, so CPU ranks read as GPUs."""
    from analysis.trace import TRACE_PARTS, trace_breakdown_bars
    from analysis.utilisation import utilisation_bars

    base = {"framework": "ddp", "loader": "synthetic", "model": "resnet50", "num_nodes": 1, "precision": "fp32"}
    base |= {"per_gpu_batch": 32, "variant": "system.name=local_cpu", "device": "cpu", "cpu_pct_mean": 50.0}
    base |= {"comm_exposed_pct": 0.0, "allreduce_exposed_pct": 0.0}
    base |= {column: 10.0 for _, *columns in TRACE_PARTS for column in columns if column}
    cells = pd.DataFrame([{**base, "world_size": 1}, {**base, "world_size": 2}])
    with matplotlib.rc_context(PAPER_RC):
        for fig in (utilisation_bars(cells), trace_breakdown_bars(cells)):
            labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
            assert labels == ["1 CPU rank", "2 CPU ranks"], labels
            title = fig._suptitle.get_text()
            assert "PyTorch-DDP" in title and "system.name=local_cpu" in title, title
            assert "GPU" not in " ".join(labels) + title

    # the report's sections pass the device: a CPU campaign's utilisation figure says CPU ranks
    root = tour(tmp_path / "runs")
    for run in (root / "synth").iterdir():
        (run / "telemetry_rank0.jsonl").write_text(
            "".join(json.dumps({"t_s": t, "rank": 0, "cpu_percent": 50.0 + t}) + "\n" for t in range(5))
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        _, figures = assemble(load_campaign(root))
    with matplotlib.rc_context(PAPER_RC):
        fig = figures["utilisation"]()
    labels = " ".join(t.get_text() for t in fig.axes[0].get_yticklabels())
    assert "CPU rank" in labels and "GPU" not in labels, labels


def test_a_cell_whose_repeats_staged_to_different_scratches_is_marked():
    """system.local_scratch parts no cell, so repeats of one cell may stage to /dev/shm and to an NVMe: marked, as
    mixed images are; a run that did not stage (no staging_s) does not count."""
    import pandas as pd

    from analysis.caveats import MIXED_SCRATCH, cell_marks, notes, short

    runs = pd.DataFrame(
        {
            "run_id": ["a", "b", "c", "d"],
            "cell_hash": ["x", "x", "y", "y"],
            "config.system.local_scratch": ["/dev/shm", "$TMPDIR", "/dev/shm", "$TMPDIR"],
            "staging_s": [1.0, 3.0, 1.0, None],
        }
    )
    marks = cell_marks(runs)
    assert short(marks["x"]) == MIXED_SCRATCH and marks["y"] == ""
    (line,) = notes(marks.tolist())
    assert line.startswith("mixed scratch: $TMPDIR in 1, /dev/shm in 1 of 2 repeats: its repeats staged")


def test_a_run_whose_ranks_ran_different_code_is_marked_under_results(tmp_path):
    """meta.json's code_mixed (a rank imported another checkout than rank 0: issue 64) marks the cell in `results`
    with its one line; a meta.json from before the field marks nothing."""
    root = tour(tmp_path / "runs")
    for run in (root / "synth").iterdir():
        if "-native-" in run.name and "-g2-" in run.name:
            _edit(run / "meta.json", code_mixed=True)
    table, excluded = results_table(root)
    marks = dict(zip(zip(table["loader"], table["ranks (CPU)"]), table["marks"].map(short)))
    assert marks[("native", 2)] == "mixed code" and marks[("native", 1)] == ""
    text = format_results(table, excluded)
    assert "mixed code: ranks ran different checkouts in 1 of 1 repeats: its ranks ran different code" in text, text
