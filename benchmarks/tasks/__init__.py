"""Tasks: what a model family is trained to do, behind one small protocol (base.py) the loop uses.

- classification.py: images and labels, cross-entropy (every classifier; every loader yields these)
- question_answering.py: BERT's SQuAD-style span prediction on synthetic token sequences
- detection.py: RetinaNet's boxes and labels on synthetic images

The model family picks its task (benchmarks/models/configs.py TASKS); build_task makes it.
"""

from __future__ import annotations

from benchmarks.models.configs import ModelConfig, TaskKind, task_of
from benchmarks.tasks.base import Task
from benchmarks.tasks.classification import ImageClassification
from benchmarks.tasks.detection import Detection
from benchmarks.tasks.question_answering import QuestionAnswering

TASKS: dict[TaskKind, type[Task]] = {
    TaskKind.classification: ImageClassification,
    TaskKind.question_answering: QuestionAnswering,
    TaskKind.detection: Detection,
}


def build_task(model: ModelConfig, *, label_smoothing: float = 0.0) -> Task:
    """The task of the model's family, for its shapes (model.seq_len, model.image_size)."""
    return TASKS[task_of(model.arch)](model, label_smoothing=label_smoothing)
