"""What a calibration run (`ddlbench predict --from RUN`) already says of the configuration to predict: its model
(with its image size), precision and per-GPU batch. predict takes them from the run's config.yaml unless the
command line gives them, and says so in one line, instead of refusing until they are typed again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from benchmarks.rundir import run_files

# the model keys of a run's config.yaml that size the step it computed beside its family (model=<arch>): the
# others (the head's classes, compile) barely change it; seq_len only for a model of sequences
MODEL_KEYS = ("depth", "width", "size", "image_size")
SEQUENCE_ARCHS = ("bert",)


def run_config(path: str) -> tuple[Path, dict] | None:
    """The config.yaml of the calibration: the run directory's own, or the first run's below a folder."""
    folder = Path(path)
    found = [folder / run_files.CONFIG] if (folder / run_files.CONFIG).is_file() else []
    found = found or sorted(folder.glob(f"**/{run_files.CONFIG}"))
    if not found:
        return None
    try:
        config = yaml.safe_load(found[0].read_text())
    except (OSError, yaml.YAMLError):
        return None
    return (found[0].parent, config) if isinstance(config, dict) else None


def _given(overrides: Sequence[str], group: str) -> bool:
    return any(o.lstrip("+~").split("=", 1)[0].split(".")[0] == group for o in overrides)


def _value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def settings_from_run(path: str, overrides: Sequence[str]) -> tuple[list[str], str]:
    """The overrides the calibration run fixes that the command line does not give (model=..., model.image_size=...,
    precision=..., run.per_gpu_batch=...), and the line that says so ('' where none are taken)."""
    found = run_config(path)
    if found is None:
        return [], ""
    run_dir, config = found
    taken: list[str] = []
    model = config.get("model") or {}
    if not _given(overrides, "model") and model.get("arch"):
        taken.append(f"model={model['arch']}")
        keys = (*MODEL_KEYS, *(["seq_len"] if model["arch"] in SEQUENCE_ARCHS else []))
        taken += [f"model.{k}={_value(model[k])}" for k in keys if model.get(k) is not None]
    precision = (config.get("precision") or {}).get("name")
    if not _given(overrides, "precision") and precision:
        taken.append(f"precision={precision}")
    batch = (config.get("run") or {}).get("per_gpu_batch")
    if batch is not None and not any(o.split("=", 1)[0] == "run.per_gpu_batch" for o in overrides):
        taken.append(f"run.per_gpu_batch={batch}")
    if not taken:
        return [], ""
    return taken, f"# from --from {run_dir.name}: {' '.join(taken)} (give any of them to predict another)"
