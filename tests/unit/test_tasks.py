"""benchmarks/tasks: each task's synthetic batches (pure functions of seed and sample id, sliced per rank as
classification's), what is refused before launch (other loaders, DataParallel over GPUs for detection,
label smoothing, a missing transformers), the unit a run counts and the loop's optimizer rebuilds."""

from __future__ import annotations

import pytest
import torch

from benchmarks.errors import ConfigError
from benchmarks.loaders.base import LoaderContext
from benchmarks.loaders.configs import SyntheticLoaderConfig
from benchmarks.loaders.synthetic import SyntheticLoader
from benchmarks.models.bert import VOCAB_SIZE
from benchmarks.models.configs import RATE_LABELS, SAMPLE_UNITS, ModelConfig, TaskKind, task_of
from benchmarks.rundir import cell_identity
from benchmarks.tasks import TASKS, Detection, ImageClassification, QuestionAnswering, build_task
from benchmarks.tasks.classification import synthetic_sample
from benchmarks.tasks.detection import BOXES_PER_IMAGE
from benchmarks.validate import validate
from tests.conftest import REPO


def _context(task, *, rank: int = 0, world_size: int = 1, per_gpu_batch: int = 4, **extra) -> LoaderContext:
    values = dict(
        rank=rank,
        world_size=world_size,
        device=torch.device("cpu"),
        per_gpu_batch=per_gpu_batch,
        seed=3,
        num_classes=5,
        image_size=32,
        channels_last=False,
        data_path=None,
        task=task,
    )
    return LoaderContext(**{**values, **extra})


def _batches(task, **kw) -> list:
    loader = SyntheticLoader(SyntheticLoaderConfig(num_batches=2, samples_per_epoch=64)).build(_context(task, **kw))
    return list(loader.batches)


def test_every_family_has_a_task_and_every_task_a_unit():
    assert task_of("resnet") is TaskKind.classification and task_of("simple_cnn") is TaskKind.classification
    assert task_of("bert") is TaskKind.question_answering and task_of("retinanet") is TaskKind.detection
    assert set(TASKS) == set(TaskKind) == set(SAMPLE_UNITS)
    assert {cls.kind: cls.sample_unit for cls in TASKS.values()} == SAMPLE_UNITS
    assert {RATE_LABELS[unit] for unit in SAMPLE_UNITS.values()} == {"img/s", "seq/s"}


def test_classification_batches_are_the_synthetic_images_they_always_were():
    """Without a task in the context (every loader's default) and with the classification task: the same
    images and labels, sample by sample, as synthetic_sample makes them."""
    plain, with_task = _batches(None), _batches(ImageClassification())
    for (images, labels), (images2, labels2) in zip(plain, with_task):
        assert torch.equal(images, images2) and torch.equal(labels, labels2)
    image, label = synthetic_sample(5, seed=3, image_size=32, num_classes=5)  # batch 1, sample 1
    assert torch.equal(plain[1][0][1], image) and int(plain[1][1][1]) == label


def _qa(seq_len: int = 24) -> QuestionAnswering:
    return build_task(ModelConfig(arch="bert", size="tiny", seq_len=seq_len))


def test_question_answering_sequences_are_padded_pairs_with_an_answer_in_the_context():
    batches = _batches(_qa())
    for batch in batches:
        ids, mask, types = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
        assert ids.shape == mask.shape == types.shape == (4, 24) and ids.dtype == torch.int64
        assert ((ids >= 0) & (ids < VOCAB_SIZE)).all()
        for row in range(4):
            length = int(mask[row].sum())
            assert 12 <= length <= 24 and mask[row, :length].all()  # 1 up to the length, then padding
            assert (ids[row, length:] == 0).all() and (types[row, length:] == 0).all()
            question = int((types[row, :length] == 0).sum())
            assert 1 <= question < length and types[row, question:length].all()  # question, then context
            start, end = int(batch["start_positions"][row]), int(batch["end_positions"][row])
            assert question <= start <= end < length and end - start < 30
    assert _qa().num_samples(batches[0]) == 4


def test_two_ranks_hold_the_halves_of_one_rank_at_double_batch():
    """The synthetic contract of every task: batch j of rank r is batch j of a 1-rank run at W*B, sliced."""
    for task in (_qa(), build_task(ModelConfig(arch="retinanet", num_classes=5, image_size=32))):
        one = _batches(task, per_gpu_batch=4)
        halves = [_batches(task, rank=r, world_size=2, per_gpu_batch=2) for r in (0, 1)]
        if isinstance(task, QuestionAnswering):
            for key, value in one[0].items():
                assert torch.equal(torch.cat([halves[0][0][key], halves[1][0][key]]), value), key
        else:
            assert torch.equal(torch.cat([halves[0][0][0], halves[1][0][0]]), one[0][0])
            for got, want in zip([*halves[0][0][1], *halves[1][0][1]], one[0][1]):
                assert all(torch.equal(got[k], want[k]) for k in ("boxes", "labels"))


def test_detection_images_carry_boxes_inside_them():
    task = build_task(ModelConfig(arch="retinanet", num_classes=5, image_size=32))
    assert isinstance(task, Detection)
    images, targets = _batches(task, channels_last=True)[0]
    assert images.shape == (4, 3, 32, 32) and images.is_contiguous(memory_format=torch.channels_last)
    assert len(targets) == 4 and task.num_samples((images, targets)) == 4
    for target in targets:
        boxes, labels = target["boxes"], target["labels"]
        assert boxes.shape == (BOXES_PER_IMAGE, 4) and labels.shape == (BOXES_PER_IMAGE,)
        assert (boxes[:, :2] >= 0).all() and (boxes[:, 2:] <= 32).all()
        assert (boxes[:, 2:] - boxes[:, :2] >= 2).all()  # at least 1/16 of the image: never degenerate
        assert ((labels >= 0) & (labels < 5)).all()


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["model=bert", "loader=native", "data.path=."],
            "loader=native yields images and class labels, not the question answering batches model=bert "
            "trains on; use loader=synthetic",
        ),
        (
            ["model=retinanet", "loader=dali", "data.path=."],
            "loader=dali yields images and class labels, not the detection batches model=retinanet",
        ),
        (
            ["model=retinanet", "framework=dp", "system=generic_8gpu"],
            "model=retinanet with framework=dp on 8 GPUs per process: DataParallel would split each image's "
            "boxes over the GPUs; use framework=ddp",
        ),
        (
            ["model=bert", "optim.label_smoothing=0.1"],
            r"optim.label_smoothing=0.1 smooths class labels, which model=bert \(question answering\) has none of",
        ),
    ],
)
def test_what_a_task_cannot_run_is_refused_before_launch(compose, overrides, expected):
    with pytest.raises(ConfigError, match=expected) as error:
        validate(compose(overrides), check_device=False)
    assert "\n" not in str(error.value)


def test_what_a_task_can_run_passes(compose):
    for overrides in (
        ["model=bert", "framework=dp", "system=generic_8gpu"],  # DataParallel scatters token tensors fine
        ["model=retinanet", "framework=dp"],  # one CPU device: nothing is split
        ["model=retinanet", "framework=fsdp", "precision=amp_bf16"],
        ["model=bert", "framework=deepspeed", "framework.zero_stage=3"],
    ):
        validate(compose(overrides), check_device=False)


def test_run_names_and_units():
    assert cell_identity.model_name("bert", None, size="large") == "bert_large"
    assert cell_identity.model_name_of({"arch": "bert", "depth": 50, "size": "base"}) == "bert_base"
    assert cell_identity.model_name_of({"arch": "retinanet", "depth": None, "size": None}) == "retinanet"
    assert (_qa().sample_unit, ImageClassification().sample_unit) == ("sequences", "images")
    assert _qa(384).describe() == {
        "task": "question_answering",
        "sample_unit": "sequences",
        "seq_len": 384,
        "vocab_size": VOCAB_SIZE,
        "max_answer_tokens": 30,
    }


def test_a_run_without_transformers_stops_before_launch_in_one_line(tmp_path, ddlbench_process):
    """sys.modules['transformers'] = None is what a machine without the package looks like to find_spec."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['transformers'] = None\n")
    result = ddlbench_process(
        "run", "--dry-run", "model=bert", f"run.root={tmp_path}", env={"PYTHONPATH": f"{tmp_path}:{REPO}"}
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "ddlbench: error: model=bert needs the transformers package, which is not installed; "
        "run \"pip install -e '.[nlp]'\""
    ]


def test_rebuilt_optimizers_keep_their_settings():
    """FSDP and ZeroRedundancyOptimizer rebuild the optimizer over new parameters; AdamW's defaults hold a
    key (decoupled_weight_decay) its constructor does not take."""
    from benchmarks.optim import constructor_settings

    params = [torch.nn.Parameter(torch.zeros(2))]
    for optimizer in (
        torch.optim.AdamW(params, lr=3e-5, weight_decay=0.01, betas=(0.8, 0.9)),
        torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True),
    ):
        rebuilt = type(optimizer)(params, **constructor_settings(optimizer))
        assert rebuilt.defaults == optimizer.defaults
