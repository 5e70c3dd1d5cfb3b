"""Study A's DALI-vs-native contrast from the predictor (docs/predict.md, "The loaders"): one `ddlbench predict`
per loader setting on JUWELS Booster (its profile: 4 GPUs and 12 CPUs per rank, its network), each from the
same synthetic-fed calibration run and `ddlbench loaderbench`'s rows of that loader, with the study's rows
beside it (--reference aach2023: printed, never fed in). Then one figure of every setting against the study,
with the error per row, and the table as Markdown.

    python perf/predict_loaders.py --out OUT \\
        --from docs/results/2026-12-04-h200-loader-predict/calibration \\
        --loader-capacity docs/results/2026-12-04-h200-loader-predict/loaderbench/loaderbench.json \\
        [--compute-scale 3]

OUT/<setting>/ holds each prediction (`ddlbench predict --out`), OUT/loaders_vs_reference.png the figure.
Nothing that exists is overwritten.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CELL = ("precision=amp_bf16", "model=resnet", "model.depth=50", "run.per_gpu_batch=64")
# label -> the loader's overrides; on juwels_booster a loader's default is 11 workers or threads
SETTINGS = {
    "dali": ("loader=dali",),
    "native": ("loader=native",),
    "native, 4 workers": ("loader=native", "loader.num_workers=4"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="a new folder")
    parser.add_argument("--from", dest="from_runs", action="append", required=True, help="the calibration run(s)")
    parser.add_argument("--loader-capacity", required=True, help="loaderbench.json with every setting's rows")
    parser.add_argument("--compute-scale", default="1", help="ddlbench predict --compute-scale (3: an A100)")
    args = parser.parse_args()
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        sys.exit(f"predict_loaders: --out {out} is not empty (never overwritten); give a new folder")
    compared = {}
    for label, loader in SETTINGS.items():
        folder = out / label.replace(", ", "-").replace(" ", "")
        command = [
            sys.executable, "-m", "ddlbench", "predict", *CELL, *loader, "--system", "juwels_booster",
            *[f"--from={r}" for r in args.from_runs], "--loader-capacity", args.loader_capacity,
            "--compute-scale", args.compute_scale, "--reference", "aach2023", "--out", str(folder),
        ]  # fmt: skip
        print(f"== {label}: ddlbench predict {' '.join(command[4:])}", flush=True)
        done = subprocess.run(command, cwd=REPO, text=True, capture_output=True)
        print("\n".join(line for line in done.stdout.splitlines() if line.startswith(("# data", "# held out"))))
        if done.returncode != 0:
            sys.exit(done.stderr.strip())
        compared[label] = pd.read_csv(folder / "reference.csv")

    from analysis.predict.figures import loaders_vs_reference

    loader_of = {label: loader[0].split("=", 1)[1] for label, loader in SETTINGS.items()}
    loaders_vs_reference(compared, loader_of).savefig(out / "loaders_vs_reference.png", dpi=150)
    print(f"\n| GPUs | {' | '.join(f'{label}: study / predicted / error' for label in compared)} |")
    print(f"|---:|{'---|' * len(compared)}")
    counts = sorted({int(g) for rows in compared.values() for g in rows["gpus"]})
    for g in counts:
        cells = []
        for rows in compared.values():
            row = rows[rows["gpus"] == g]
            cells.append(
                "-"
                if row.empty
                else f"{row['allreduce_pct_ref'].iloc[0]:.1f} / {row['allreduce_pct_pred'].iloc[0]:.1f} / "
                f"{row['allreduce_err_pp'].iloc[0]:+.1f}"
            )
        print(f"| {g} | {' | '.join(cells)} |")
    print(f"\n[predict_loaders] figure and predictions -> {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
