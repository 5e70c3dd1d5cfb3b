"""Seed study A's context, published and recorded: its table of distributed frameworks (related work), its
software stack beside the runs', and its data sets' sizes."""

from __future__ import annotations

import pandas as pd

from analysis.papers.base import PaperInput, Section
from analysis.papers.common import software_stack


def dataset_sizes(paper: PaperInput) -> Section:
    section = Section()
    section.says(paper, "dataset_size_gb_imagenet_tfrecord")
    section.published(paper, "dataset_size_gb_imagenet_tfrecord", "dataset_size_gb_imagenet_jpg")
    section.text_only(
        "the sizes of the study's ImageNet copies on JUWELS; the runs record no data set's size (`ddlbench data "
        "convert` makes the TFRecord copy of an image folder, `du -sh` gives both sizes)"
    )
    return section


FRAMEWORKS_TABLE = pd.DataFrame(
    [
        ("DistBelief", "Model + Data", "Asynchronous", "no"),
        ("FireCaffe", "Data", "Synchronous", "no"),
        ("Horovod", "Model + Data", "Synchronous", "framework=horovod"),
        ("MXNet", "Model + Data", "Bounded Asynchronous", "no"),
        ("Petuum", "Model + Data", "Bounded Asynchronous", "no"),
        ("TensorFlow", "model + Data", "Bounded Asynchronous", "no"),
        ("PyTorch-DDP", "Model + Data", "Synchronous", "framework=ddp"),
        ("DeepSpeed", "Model + Data", "Synchronous", "framework=deepspeed"),
    ],
    columns=["Framework", "Parallelism", "Communication", "in ddlbench"],
)


def frameworks(paper: PaperInput) -> Section:
    section = Section()
    section.text(
        "Published: the study's table of distributed frameworks (its related work: 'Framework | Parallelism | "
        "Communication'), with the ddlbench option of each it benchmarks (ours)."
    )
    section.table(FRAMEWORKS_TABLE)
    return section


def stack(paper: PaperInput) -> Section:
    section = Section()
    section.text("Published: the study's software stack on JUWELS; measured: what these runs recorded (meta.json).")
    section.table(software_stack(paper, ["gcc", "openmpi", "python", "cuda", "torch", "horovod", "deepspeed", "dali"]))
    return section
