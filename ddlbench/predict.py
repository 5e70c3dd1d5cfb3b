"""`ddlbench predict`: throughput, efficiency and the time breakdown at any GPU count. The command's work
(calibration, validation, tables) is analysis/predict/command.py; the model is the rest of analysis/predict/.
"""

from __future__ import annotations

import argparse


def cmd_predict(args: argparse.Namespace) -> int:
    from analysis.predict import command

    return command.cmd_predict(args)


PREDICT_GPUS = "1,2,4,8,16,32,64,128,256,512,1024"
PREDICT_DESCRIPTION = """\
    ddlbench predict OVERRIDES --gpus 4,8,...,1024 --from RUN_DIR [--system NAME] [--commbench FILE|DIR ...]
                     [--compute-scale F | --compute-from RUN_DIR] [--loader-capacity FILE] [--reference aach2023 [--fit-to-reference]]
                     [--validate ROOT] [--out DIR]

OVERRIDES pick the configuration to predict (framework, loader, model, per-GPU batch, precision), as
for `ddlbench run`. --from names the calibration run(s): completed runs of that model, per-GPU batch,
precision and loader (a 1-GPU run as a rule); anything they did not measure is refused in one line (every
key of model.* and precision.*, optim.name, the parameter sharding, the loader), except a loader whose
pace --loader-capacity gives (a --from run that waited for its own loader gives that loader's pace itself:
its batches' arrivals). A --from run made on another system than the one predicted (a CPU, another GPU)
is refused unless --compute-scale or --compute-from says what the compute is there; the prediction is
then labelled so. The network comes from --commbench measurements where given, else from the system
profile's `network` block.
"""


def add_parser(sub) -> None:
    """Register `ddlbench predict`."""
    p = sub.add_parser(
        "predict",
        help="throughput, efficiency and the allreduce / data / compute breakdown at any GPU count, "
        "from a measured run and commbench (or the system's network)",
        description=PREDICT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("overrides", nargs="*", help="the configuration to predict (Hydra overrides, as for run)")
    p.add_argument("--gpus", default=PREDICT_GPUS, help=f"GPU counts (default {PREDICT_GPUS})")
    p.add_argument("--system", help="system profile (the same as the override system=NAME)")
    p.add_argument(
        "--from",
        dest="from_runs",
        action="append",
        metavar="RUN_DIR",
        help="calibration run (repeatable): its compute, data and jitter; a held-out run of the same size "
        "uses the one of its size, else the smallest",
    )
    p.add_argument(
        "--commbench", action="append", metavar="FILE|DIR", help="commbench JSON to fit the network to (repeatable)"
    )
    p.add_argument(
        "--compute-scale",
        type=float,
        metavar="F",
        help="the target GPU's compute time over the calibration's: needed, and labelled on every table and figure, "
        "where the --from run computed on another system (a CPU, another GPU) than the one predicted",
    )
    p.add_argument(
        "--compute-from",
        metavar="RUN_DIR",
        help="a run of this configuration on the system predicted: its compute (fwd, bwd, opt, other, jitter) "
        "replaces the --from run's, whose data path stays (labelled on every table and figure)",
    )
    p.add_argument(
        "--loader-capacity",
        metavar="FILE",
        help="loaderbench.json ('ddlbench loaderbench --out DIR' on the machine predicted, at the predicted batch and "
        "image size): one rank's loader alone, its img/s and the seconds between its batches, from which each rank's "
        "loader is simulated; for a loader the --from run was not fed by",
    )
    p.add_argument(
        "--reference",
        choices=("aach2023",),
        help="print the study's rows beside the prediction, with the error per row (they never feed it)",
    )
    p.add_argument(
        "--fit-to-reference",
        action="store_true",
        help="fit data, other and jitter to the --reference's smallest GPU count instead (labelled 'fitted to the "
        "study': no independent check there)",
    )
    p.add_argument("--validate", metavar="ROOT", help="predict every measured run below ROOT and report the error")
    p.add_argument("--goal-pct", type=float, default=10.0, help="the error the validation counts as met (10)")
    p.add_argument("--out", help="new folder for the tables (CSV) and figures")
    p.set_defaults(func=cmd_predict)
