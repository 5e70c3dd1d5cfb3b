"""The model family's settings: which architecture, its depth, width, size, ablations, classes, image size
and sequence length, and the task each family trains. Torch-free.

Kept apart from the builders (benchmarks/models/__init__.py, which import torch and torchvision when
they build) so that Hydra's ConfigStore, validate() and campaign planning check a model choice
without torch: see benchmarks/adapter_config.py. The dataclass is the one home of the defaults;
conf/model/<option>.yaml sets only what the option changes (arch, depth, ...).

Each family reads the keys it has (depth: resnet, vgg; width: shufflenet_v2; batch_norm: resnet, vgg;
residual: resnet; size, seq_len: bert) and ignores the others, as it always ignored model.depth: an
experiment may switch model.arch over the default ResNet. An ablation asked of a family that has the part
but no ablation built (WITHOUT_ABLATIONS) is refused, so that no run is labelled what it was not.

Every family trains one task (TASKS; benchmarks/tasks/ runs it): image classification unless said,
question answering (BERT: a span head on token sequences) or object detection (RetinaNet). The task says
what one sample is (SAMPLE_UNITS): summary.json's `sample_unit`, what `throughput_img_s` counts.

model.num_classes=auto (the default) is the class count of the data set, counted before launch by
benchmarks/validate.py (resolve_num_classes), which writes the number into the config: config.yaml, the
run key and the model's head all have it, never the word.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, ClassVar

from omegaconf import MISSING

from benchmarks.adapter_config import AdapterConfig, Choice
from benchmarks.errors import ConfigError


class Arch(Choice):
    """The model families benchmarks/models builds."""

    resnet = "resnet"
    vgg = "vgg"
    mobilenet_v2 = "mobilenet_v2"
    shufflenet_v2 = "shufflenet_v2"
    simple_cnn = "simple_cnn"
    bert = "bert"
    retinanet = "retinanet"


class BertSize(Choice):
    """model.size of model=bert: BERT-base and BERT-large (Devlin et al. 2019), and BERT-tiny (2 layers of 128,
    Turc et al. 2019) for CPU tests; the shapes are in benchmarks/models/bert.py."""

    tiny = "tiny"
    base = "base"
    large = "large"


class TaskKind(Choice):
    """What a model family is trained to do (benchmarks/tasks/ has one module each)."""

    classification = "classification"
    question_answering = "question_answering"
    detection = "detection"


# the task of each family that is not an image classifier
TASKS: dict[str, TaskKind] = {"bert": TaskKind.question_answering, "retinanet": TaskKind.detection}
# what one sample of a task is: the unit of summary.json's throughput (`sample_unit`)
SAMPLE_UNITS: dict[TaskKind, str] = {
    TaskKind.classification: "images",
    TaskKind.question_answering: "sequences",
    TaskKind.detection: "images",
}
# how tables and progress lines name a throughput in each unit
RATE_LABELS: dict[str, str] = {"images": "img/s", "sequences": "seq/s"}
# BERT's learned position embeddings: the longest sequence it takes
BERT_MAX_SEQ_LEN = 512
# model.num_classes=auto: the data set's class count (benchmarks/validate.py resolve_num_classes)
AUTO = "auto"
# what auto is where there is no data set to count (the synthetic loader without data.path, and the tasks
# without class labels): ImageNet's 1000 classes, the default before auto
NUM_CLASSES_WITHOUT_DATA = 1000


# the package a family's builder needs beyond torch and torchvision, and the command that installs it
LIBRARIES: dict[str, tuple[str, str]] = {"bert": ("transformers", "pip install -e '.[nlp]'")}


def check_library(arch: str) -> None:
    """ConfigError naming the package and its install command when the family's library is missing."""
    needed = LIBRARIES.get(str(arch))
    if needed is not None and importlib.util.find_spec(needed[0]) is None:
        raise ConfigError(f"model={arch} needs the {needed[0]} package, which is not installed; run {needed[1]!r}")


def task_of(arch: str) -> TaskKind:
    """The task a model family trains: image classification unless TASKS says otherwise."""
    return TASKS.get(str(arch), TaskKind.classification)


# the depths torchvision builds, per family that has a depth
DEPTHS: dict[str, tuple[int, ...]] = {"resnet": (18, 34, 50, 101, 152), "vgg": (11, 13, 16, 19)}
_FAMILY = {"resnet": "ResNet", "vgg": "VGG", "shufflenet_v2": "ShuffleNetV2"}
# the channel multipliers torchvision builds (shufflenet_v2_x0_5 ... x2_0), per family that has a width
WIDTHS: dict[str, tuple[float, ...]] = {"shufflenet_v2": (0.5, 1.0, 1.5, 2.0)}
# families whose BatchNorm and shortcuts are part of the design, with no ablation built
WITHOUT_ABLATIONS = ("mobilenet_v2", "shufflenet_v2")
# the smallest image a family's layers take: VGG's five max-pools halve it to 1 pixel at 32; RetinaNet's
# feature pyramid goes down to stride 128 (P7), the synthetic boxes need room
MIN_IMAGE_SIZE: dict[str, int] = {"vgg": 32, "retinanet": 32}


def check_depth(arch: str, depth: int | None) -> None:
    """ConfigError unless `depth` is one the family builds (families without a depth ignore it: an
    experiment that picks model.arch=simple_cnn over the default ResNet keeps its depth)."""
    allowed = DEPTHS.get(str(arch))
    if allowed is not None and depth not in allowed:
        raise ConfigError(
            f"model.depth={depth} is not a {_FAMILY[str(arch)]} depth; choose one of {list(allowed)} "
            f"(e.g. model.depth={allowed[0]})"
        )


def check_width(arch: str, width: float | None) -> None:
    """ConfigError unless `width` is one the family builds (families without a width ignore it)."""
    allowed = WIDTHS.get(str(arch))
    if allowed is not None and width not in allowed:
        raise ConfigError(
            f"model.width={width} is not a {_FAMILY[str(arch)]} width; choose one of {list(allowed)} "
            f"(e.g. model.width=1.0)"
        )


def check_size(arch: str, size: str | None) -> None:
    """ConfigError unless model=bert has a model.size (families without a size ignore it)."""
    if str(arch) == "bert" and size is None:
        raise ConfigError(f"model.size=None is not a BERT size; choose {BertSize.listed()} (e.g. model.size=base)")


def check_ablation(arch: str, *, batch_norm: bool | None, residual: bool) -> None:
    """ConfigError when an ablation is asked of a family that builds none (WITHOUT_ABLATIONS)."""
    if str(arch) not in WITHOUT_ABLATIONS:
        return
    for key, value in (("batch_norm", batch_norm), ("residual", residual)):
        if value is False:
            raise ConfigError(
                f"model.{key}=false is not built for model.arch={arch}; drop it, or choose model=resnet"
                f"{' or model=vgg' if key == 'batch_norm' else ''} for the ablation"
            )


class CompileMode(Choice):
    """model.compile_mode: torch.compile's mode, its hyphens as underscores (`torch_mode`)."""

    default = "default"
    reduce_overhead = "reduce_overhead"
    max_autotune = "max_autotune"
    max_autotune_no_cudagraphs = "max_autotune_no_cudagraphs"

    @property
    def torch_mode(self) -> str:
        return self.value.replace("_", "-")


@dataclass
class ModelConfig(AdapterConfig):
    """One model: its family (`arch`) and shape."""

    GROUP: ClassVar[str] = "model"
    arch: Arch = MISSING
    depth: int | None = None  # resnet: 18|34|50|101|152; vgg: 11|13|16|19; others: none
    width: float | None = None  # shufflenet_v2: 0.5|1.0|1.5|2.0 (the channel multiplier); others: none
    # resnet, vgg: BatchNorm after each conv (false: none; ResNet's norm layers become Identity); None: the
    # family's own, as torchvision builds it (ResNet with, VGG without); the option YAMLs set it
    batch_norm: bool | None = None
    residual: bool = True  # resnet: false removes the blocks' skip additions (and their 1x1 projections)
    size: BertSize | None = None  # bert: tiny|base|large; others: none
    # classifiers: the classes (auto: the data set's, NUM_CLASSES_WITHOUT_DATA without one); retinanet: the
    # object classes; bert: none. A number or auto: typed Any, as OmegaConf 2.3 cannot merge a Union field
    # of a schema in Hydra's ConfigStore; check() holds it to the two
    num_classes: Any = AUTO
    image_size: int = 224  # image models: the side of the square input (RetinaNet takes it unresized)
    seq_len: int = 384  # bert: tokens per sequence (SQuAD fine-tuning's 384); image models: none
    compile: bool = False  # torch.compile the model
    # torch.compile's mode (model.compile=true): default; reduce_overhead (CUDA graphs: the step's kernels
    # launched as one graph, where the model allows: static shapes, no host sync); max_autotune (and
    # max_autotune_no_cudagraphs): autotuned Triton matmuls and convolutions, minutes of compile time
    compile_mode: CompileMode = CompileMode.default

    def check(self) -> None:
        check_depth(self.arch, self.depth)
        check_width(self.arch, self.width)
        check_size(self.arch, self.size)
        check_ablation(self.arch, batch_norm=self.batch_norm, residual=self.residual)
        if str(self.arch) == "bert" and not 2 <= self.seq_len <= BERT_MAX_SEQ_LEN:
            raise ConfigError(
                f"model.seq_len={self.seq_len} must be between 2 and {BERT_MAX_SEQ_LEN} (BERT's position "
                "embeddings), e.g. model.seq_len=384"
            )
        classes = self.num_classes
        if classes != AUTO and (isinstance(classes, bool) or not isinstance(classes, int) or classes < 1):
            raise ConfigError(
                f"model.num_classes={classes!r} must be a whole number >= 1 or auto (the data set's class count), "
                "e.g. model.num_classes=auto"
            )
        if self.compile_mode != CompileMode.default and not self.compile:
            raise ConfigError(
                f"model.compile_mode={self.compile_mode} needs model.compile=true (torch.compile's mode); add it, "
                "or drop model.compile_mode"
            )
        self.at_least(
            "image_size",
            MIN_IMAGE_SIZE.get(str(self.arch), 1),
            hint=f" for model.arch={self.arch}" if str(self.arch) in MIN_IMAGE_SIZE else "",
        )
