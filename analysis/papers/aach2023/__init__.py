"""Seed study A: Aach et al. 2023, Horovod vs PyTorch-DDP vs DeepSpeed with DALI and the native loader,
ResNet-50/101/152 on JUWELS Booster (4 to 1024 A100 GPUs), and its learning-rate annealing study.

STUDY lists its exhibits in the study's order; they are drawn by scaling.py (throughput, speedup,
efficiency, DALI's speed-up, frameworks by scale), breakdown.py (the breakdown tables, data time),
learning_rate.py (the annealing study) and context.py (the frameworks table, software stack, data sets).
"""

from __future__ import annotations

from analysis.papers.aach2023.breakdown import breakdown, data_time
from analysis.papers.aach2023.context import dataset_sizes, frameworks, stack
from analysis.papers.aach2023.learning_rate import CPU_LR, LR, lr_study
from analysis.papers.aach2023.scaling import (
    CPU_SCALING,
    SCALING,
    dali_speedup,
    efficiency,
    frameworks_by_scale,
    speedup,
    throughput,
)
from analysis.papers.base import Exhibit, Study

STUDY = Study(
    name="aach2023",
    title="Aach et al. 2023: Horovod, PyTorch-DDP and DeepSpeed with DALI and native loaders on JUWELS Booster",
    campaigns=("aach2023_scaling", "aach2023_lr", "aach2023_lr_cpu", "aach2023_scaling_cpu"),
    commands=(SCALING, CPU_SCALING, LR, CPU_LR),
    exhibits=(
        Exhibit("Frameworks table", "Distributed deep-learning frameworks", ("published",), frameworks),
        Exhibit("Software stack", "JUWELS software stack", ("measured", "published"), stack),
        Exhibit("Throughput vs GPUs", "Throughput per framework and loader", ("measured", "predicted"), throughput),
        Exhibit("Speedup", "Speedup per framework and loader", ("measured",), speedup),
        Exhibit("Efficiency", "Scaling efficiency per framework and loader", ("measured",), efficiency),
        Exhibit(
            "Breakdown table (a) ResNet50",
            "Training of ResNet50: AllReduce, data, cuDNN %",
            ("measured", "predicted", "published"),
            breakdown("a"),
        ),
        Exhibit(
            "Breakdown table (b) ResNet101",
            "Training of ResNet101: AllReduce, data, cuDNN %",
            ("measured", "predicted", "published"),
            breakdown("b"),
        ),
        Exhibit(
            "Breakdown table (c) ResNet152",
            "Training of ResNet152: AllReduce, data, cuDNN %",
            ("measured", "predicted", "published"),
            breakdown("c"),
        ),
        Exhibit(
            "Data time",
            "Absolute data-loading time, DALI vs native (text)",
            ("measured", "published"),
            data_time,
            from_text=True,
        ),
        Exhibit(
            "DALI speed-up",
            "DALI over the native loader in throughput (text)",
            ("measured", "predicted", "published"),
            dali_speedup,
            from_text=True,
        ),
        Exhibit(
            "Dataset sizes",
            "ImageNet as TFRecord and as JPEG (text)",
            ("published",),
            dataset_sizes,
            from_text=True,
        ),
        Exhibit(
            "Frameworks by scale",
            "Which framework is fastest on few and on many GPUs (text)",
            ("measured", "published"),
            frameworks_by_scale,
            from_text=True,
        ),
        Exhibit(
            "LR annealing accuracy",
            "Validation accuracy per schedule and global batch",
            ("measured", "published"),
            lr_study,
        ),
    ),
)
