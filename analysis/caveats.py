"""What a cell's figures must be read with, said once: its ranks were **oversubscribed** (more ranks on a
host than it had CPUs: meta.json's `oversubscribed`, `host_ranks`, `host_cores`), its training
**diverged** (a loss went NaN or infinite: summary.json's `nonfinite_loss_step` and `nonfinite_loss_phase`,
or, for older summaries, the rank logs' non-finite losses that analysis.load lists in problems), or its
repeats ran in **mixed images** (meta.json's `container`: analysis.container_images; repeats must be one
configuration, and the image is no setting that parts cells), or staged their data to a **mixed scratch**
(system.local_scratch, no setting that parts cells either), or its ranks ran **mixed code** (meta.json's
`code_mixed`: some rank imported another checkout, sha or dirty state than rank 0), or it ran beside other
work: a **shared host** (other processes' CPU time, another ddlbench run or Slurm job on a host), a **GPU
shared** with another process, or a GPU **throttled** (a power cap, heat, a hardware slowdown, XID or ECC
errors), as each host observed its measured window (summary.json's `interference_marks`:
launchers/lifecycle/interference.py). A cell is marked where any of its runs is. `results`, the report's tables and `compare` show the short words in a
`marks` column (`short`) and explain each under the table in one line (`notes`).

A cell's marks are one text, "word: detail" parts joined by "; " (`cell_marks`), so that a table carries
them as one column; `short` and `notes` read it back.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from analysis.cells import CELL
from analysis.container_images import differ, run_images
from analysis.report_blocks import Block

OVERSUBSCRIBED, DIVERGED, MIXED_IMAGES = "oversubscribed", "diverged", "mixed images"
MIXED_SCRATCH = "mixed scratch"
# summary.json's interference_marks (launchers/lifecycle/interference.py writes these words)
SHARED_HOST, GPU_SHARED, THROTTLED = "shared host", "GPU shared", "throttled"
INTERFERENCE = "interference_marks"
MIXED_CODE = "mixed code"
SCRATCH = "config.system.local_scratch"  # where a staged run's copy went (analysis.staging): no setting of the cell
# what each mark means for the cell's figures: the end of its line under a table
EXPLAINED = {
    OVERSUBSCRIBED: "the ranks shared cores, so the step times measure the sharing as well as the training",
    DIVERGED: "the training diverged; the throughput stands",
    MIXED_IMAGES: (
        "repeats must be one configuration, so the median and interval mix the images' difference with the "
        "run-to-run noise; run the cell again in one image"
    ),
    MIXED_SCRATCH: (
        "its repeats staged their data to different system.local_scratch folders, whose copy and read rates "
        "differ (/dev/shm, a local NVMe): the staging time and a loader-bound throughput mix both; run the cell "
        "again with one scratch"
    ),
    SHARED_HOST: (
        "other work ran on the run's hosts in its measured window, so the step times measure the sharing as well "
        "as the training; ask for whole nodes (sbatch --exclusive; a campaign's benchmark jobs one node each) and "
        "run alone"
    ),
    GPU_SHARED: (
        "another process computed on the run's GPUs in its measured window; ask for the GPUs alone (--exclusive, "
        "nvidia-smi -c EXCLUSIVE_PROCESS) and check nvidia-smi before the run"
    ),
    THROTTLED: (
        "the GPUs slowed their clocks (power cap, heat, hardware slowdown) or reported errors in the measured "
        "window, so the figures are a slower GPU's; check power limits and cooling (nvidia-smi -q -d PERFORMANCE) "
        "or run on another node"
    ),
    MIXED_CODE: (
        "its ranks ran different code (each rank log's header `code` names its package folder, git sha and dirty "
        "state), so the figures are of no one version; run every rank from one checkout"
    ),
}
# how far a cell's note lists its runs' interference details (each host's one line per run)
MAX_DETAILS = 3
IMAGE_DIFFERS = "image differs"  # compare: a paired cell whose two sides ran in different images
PARTS, WORD = "; ", ": "  # a marks text: "oversubscribed: 3 ranks on 2 CPUs; diverged: loss non-finite from ..."
# analysis.load.ranklogs' problem for a step whose loss was not finite (a summary from before the field)
_DIVERGED_PROBLEM = "the training diverged"


def run_marks(runs: pd.DataFrame, problems: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per run (the runs table's rows, by run_id): `oversubscribed` (False where unknown), `host_ranks`,
    `host_cores`; `diverged`, and where the summary names it, `nonfinite_loss_step` and `_phase`; `image`
    (analysis.container_images)."""
    index = runs.index
    absent = pd.Series(pd.NA, index=index, dtype="object")
    logged = set()
    if problems is not None and not problems.empty and "problem" in problems:
        hit = problems["problem"].astype(str).str.contains(_DIVERGED_PROBLEM, regex=False)
        logged = set(problems.loc[hit, "run_id"].astype(str))
    step = pd.to_numeric(runs.get("nonfinite_loss_step", absent), errors="coerce")
    return pd.DataFrame(
        {
            "run_id": runs["run_id"].astype(str) if "run_id" in runs else pd.Series("", index=index),
            OVERSUBSCRIBED: runs.get(OVERSUBSCRIBED, absent).astype("boolean").fillna(False).astype(bool),
            "host_ranks": pd.to_numeric(runs.get("meta.host_ranks", absent), errors="coerce"),
            "host_cores": pd.to_numeric(runs.get("meta.host_cores", absent), errors="coerce"),
            DIVERGED: step.notna() | runs.get("run_id", absent).astype(str).isin(logged),
            "nonfinite_loss_step": step,
            "nonfinite_loss_phase": runs.get("nonfinite_loss_phase", absent),
            "image": run_images(runs),
            # the hosts' verdicts as "word: detail; ..." ('' none; NA where the run did not observe)
            INTERFERENCE: runs.get(INTERFERENCE, absent).astype("object"),
            MIXED_CODE: runs.get("meta.code_mixed", absent).astype("boolean").fillna(False).astype(bool),
            # a staged run's scratch (staging_s recorded); NA for a run that read data.path itself
            "scratch": runs.get(SCRATCH, absent).where(
                pd.to_numeric(runs.get("staging_s", absent), errors="coerce").notna()
            ),
        },
        index=index,
    )


def cell_marks(
    runs: pd.DataFrame, by: pd.Series | str = "cell_hash", problems: pd.DataFrame | None = None
) -> pd.Series:
    """Per cell (`by`: a column of runs, or a Series of keys aligned with runs, e.g. compare's pair keys):
    its marks as one text ('' for none). `runs`: the counted runs (a mark is of the runs that count)."""
    keys = runs[by] if isinstance(by, str) else by
    if runs.empty or keys is None:
        return pd.Series(dtype="object")
    marks = run_marks(runs, problems).assign(key=pd.Series(keys).to_numpy())
    marks = marks[marks["key"].notna()]
    return pd.Series({key: _text(rows) for key, rows in marks.groupby("key", sort=False)}, dtype="object")


def _text(runs: pd.DataFrame) -> str:
    """One cell's marks, from its runs' run_marks rows."""
    parts = []
    over = runs[runs[OVERSUBSCRIBED]]
    if not over.empty:
        known = over.dropna(subset=["host_ranks", "host_cores"])
        sizes = [
            f"{int(r)} ranks on {int(c)} CPU{'s' if c != 1 else ''}"
            for r, c in dict.fromkeys(zip(known["host_ranks"], known["host_cores"]))
        ]
        parts.append(f"{OVERSUBSCRIBED}{WORD}{', '.join(sizes) or 'more ranks than CPUs on a host'}")
    bad = runs[runs[DIVERGED]]
    if not bad.empty:
        stepped = bad.dropna(subset=["nonfinite_loss_step"]).sort_values("nonfinite_loss_step")
        if stepped.empty:
            detail = "loss non-finite in the rank logs"
        else:
            first = stepped.iloc[0]
            phase = first["nonfinite_loss_phase"]
            detail = f"loss non-finite from step {int(first['nonfinite_loss_step'])}"
            detail += f" ({phase} phase)" if isinstance(phase, str) and phase else ""
        if len(bad) < len(runs):
            detail += f" in {len(bad)} of {len(runs)} repeats"
        parts.append(f"{DIVERGED}{WORD}{detail}")
    images = runs["image"].value_counts()
    if len(images) > 1:
        said = ", ".join(f"{image} in {n}" for image, n in sorted(images.items()))
        parts.append(f"{MIXED_IMAGES}{WORD}{said} of {len(runs)} repeats")
    mixed = int(runs[MIXED_CODE].sum())
    if mixed:
        parts.append(f"{MIXED_CODE}{WORD}ranks ran different checkouts in {mixed} of {len(runs)} repeats")
    scratches = runs["scratch"].dropna().astype(str).value_counts()
    if len(scratches) > 1:
        said = ", ".join(f"{scratch} in {n}" for scratch, n in sorted(scratches.items()))
        parts.append(f"{MIXED_SCRATCH}{WORD}{said} of {len(runs)} repeats")
    parts.extend(_interference(runs))
    return PARTS.join(parts)


def _interference(runs: pd.DataFrame) -> list[str]:
    """The interference words of a cell's runs, each with its first details and how many repeats it marks."""
    seen: dict[str, list[str]] = {}
    for text in runs[INTERFERENCE].dropna():
        for word, detail in _parts(text):
            if word in (SHARED_HOST, GPU_SHARED, THROTTLED):
                seen.setdefault(word, []).append(detail)
    parts = []
    for word, details in seen.items():
        said = " | ".join(dict.fromkeys(details[:MAX_DETAILS])).replace(PARTS, ", ")
        if len(details) < len(runs):
            said += f" (in {len(details)} of {len(runs)} repeats)"
        parts.append(f"{word}{WORD}{said}")
    return parts


def with_marks(cell_table: pd.DataFrame, marks: pd.Series) -> pd.DataFrame:
    """cell_table (keyed by cell_hash) with each cell's `marks` text ('' for none; `marks`: cell_marks)."""
    if "cell_hash" not in cell_table:
        return cell_table.assign(marks="")
    return cell_table.assign(marks=cell_table["cell_hash"].map(marks).fillna("").astype("object"))


def _parts(text: object) -> list[tuple[str, str]]:
    if not isinstance(text, str) or not text:
        return []
    return [part.partition(WORD)[::2] for part in text.split(PARTS)]


def short(text: object) -> str:
    """A marks text as a table shows it: its words ('oversubscribed, diverged'), '' for none."""
    return ", ".join(word for word, _ in _parts(text))


def notes(texts: Iterable[object]) -> list[str]:
    """One line per mark that some cell has, under the table: the word, its details (each once) and what it
    means for the figures, e.g. 'diverged: loss non-finite from step 3 (measured phase): the training
    diverged; the throughput stands'."""
    details: dict[str, dict[str, None]] = {}
    for text in texts:
        for word, detail in _parts(text):
            details.setdefault(word, {})[detail] = None
    return [f"{word}{WORD}{PARTS.join(details[word])}{WORD}{EXPLAINED[word]}" for word in EXPLAINED if word in details]


def mark_tables(blocks: list[Block], cells: pd.DataFrame, marks: pd.Series) -> None:
    """The report's tables of cells (those showing every CELL column) get a `marks` column where some row
    is marked: the words, a row matched to its cell by CELL and variant. The lines (notes) stand under the
    first marked table, visible; the other marked tables carry them in their folded definitions."""
    if "cell_hash" not in cells or not marks.astype(bool).any():
        return
    marked = with_marks(cells, marks)
    first = None
    for k, block in enumerate(blocks):
        table = block.content
        if block.kind != "table" or not isinstance(table, pd.DataFrame) or not set(CELL) <= set(table.columns):
            continue
        on = [c for c in [*CELL, "variant"] if c in table and c in marked]
        per_row = marked.drop_duplicates(on).set_index(on)["marks"]
        texts = [per_row.get(row, "") for row in table[on].itertuples(index=False, name=None)]
        if not any(texts):
            continue
        block.content = table.assign(marks=[short(t) for t in texts])
        lines = notes(texts)
        if first is None:
            first = (k, lines)
        else:
            block.note = "\n\n".join([*([block.note] if block.note else []), *lines])
    if first is not None:
        blocks.insert(first[0] + 1, Block("text", "\n\n".join(first[1])))


def compared_marks(table: pd.DataFrame) -> pd.Series:
    """Per row of a comparison, its cells' marks (analysis.caveats) as words and the side that has them:
    'oversubscribed in B', 'diverged in A and B'; 'image differs' where a paired cell's sides ran in different
    images (analysis.container_images: compare's line under the table names them)."""
    if "marks_a" not in table:
        return pd.Series("", index=table.index, dtype="object")

    def said(text_a: object, text_b: object) -> str:
        words_a, words_b = short(text_a).split(", "), short(text_b).split(", ")
        both = [w for w in dict.fromkeys([*words_a, *words_b]) if w]
        sides = {w: " and ".join(t for t, ws in (("A", words_a), ("B", words_b)) if w in ws) for w in both}
        return ", ".join(f"{w} in {side}" for w, side in sides.items())

    words = [said(a, b) for a, b in zip(table["marks_a"], table["marks_b"])]
    words = [", ".join(filter(None, [w, IMAGE_DIFFERS if d else ""])) for w, d in zip(words, differ(table))]
    return pd.Series(words, index=table.index, dtype="object")


def interfered_changes(table: pd.DataFrame) -> list[str]:
    """compare's line for the changes it calls (a regression, an improvement) on a cell whose runs were marked
    shared host, GPU shared or throttled on either side: such a change may be the sharing, not the setting."""
    if "flag" not in table or "marks_a" not in table:
        return []
    words = (SHARED_HOST, GPU_SHARED, THROTTLED)
    hit = [
        any(w in short(a).split(", ") or w in short(b).split(", ") for w in words)
        for a, b in zip(table["marks_a"], table["marks_b"])
    ]
    called = table["flag"].isin(["regression", "improvement"]).to_numpy()
    marked = int(sum(h and c for h, c in zip(hit, called)))
    if not marked:
        return []
    return [
        f"{marked} of {int(called.sum())} changes called here (regression, improvement) are of cells marked "
        f"{', '.join(words)}: the difference may be the other work on the node, not the setting; run them again "
        "alone before reading them as a change"
    ]
