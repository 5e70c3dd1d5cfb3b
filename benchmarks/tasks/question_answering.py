"""Extractive question answering, as BERT's SQuAD fine-tuning: token sequences in, a start and an end
logit per token out; the loss is the mean of the two cross-entropies over the positions (transformers'
BertForQuestionAnswering computes the same).

Synthetic sequences stand in for SQuAD's tokenised question + context pairs, padded to model.seq_len:
a length between half the sequence and all of it (attention_mask 1 up to it, 0 over the padding), a
question over the first quarter of it at most (token_type_ids 0, the context 1), random WordPiece ids,
and an answer span of up to 30 tokens inside the context (SQuAD's max_answer_length).
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch.nn import functional

from benchmarks.models.bert import VOCAB_SIZE
from benchmarks.models.configs import SAMPLE_UNITS, ModelConfig, TaskKind
from benchmarks.tasks.base import SampleContext, generator

MAX_ANSWER_TOKENS = 30
PAD_ID = 0  # [PAD] in bert-base-uncased's vocabulary
# the model's inputs, in the order the batch holds them, and the targets
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
TARGETS = ("start_positions", "end_positions")


def synthetic_sample(sample_id: int, *, seed: int, seq_len: int) -> dict[str, torch.Tensor]:
    """One padded question + context sequence and its answer span, a pure function of (seed, sample_id)."""
    g = generator(seed, sample_id)

    def draw(low: int, high: int) -> int:  # an integer in [low, high)
        return int(torch.randint(low, high, (1,), generator=g))

    length = draw(max(2, seq_len // 2), seq_len + 1)
    question = 1 + draw(0, max(1, length // 4))  # tokens 0..question-1; the context follows
    start = draw(question, length)
    end = draw(start, min(length, start + MAX_ANSWER_TOKENS))
    positions = torch.arange(seq_len)
    input_ids = torch.randint(VOCAB_SIZE, (seq_len,), generator=g).masked_fill(positions >= length, PAD_ID)
    return {
        "input_ids": input_ids,
        "attention_mask": (positions < length).long(),
        "token_type_ids": ((positions >= question) & (positions < length)).long(),
        "start_positions": torch.tensor(start),
        "end_positions": torch.tensor(end),
    }


class QuestionAnswering:
    kind: ClassVar[TaskKind] = TaskKind.question_answering
    sample_unit: ClassVar[str] = SAMPLE_UNITS[TaskKind.question_answering]

    def __init__(self, model: ModelConfig, *, label_smoothing: float = 0.0) -> None:
        assert label_smoothing == 0.0, "validate() refuses optim.label_smoothing for this task"
        self.seq_len = int(model.seq_len)

    def synthetic_batch(self, sample_ids: range, ctx: SampleContext) -> dict[str, torch.Tensor]:
        samples = [synthetic_sample(i, seed=ctx.seed, seq_len=self.seq_len) for i in sample_ids]
        return {key: torch.stack([s[key] for s in samples]).to(ctx.device) for key in (*INPUTS, *TARGETS)}

    def loss(self, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        # a tuple, not transformers' ModelOutput: DataParallel gathers tuples of tensors from its replicas
        start_logits, end_logits = model(**{key: batch[key] for key in INPUTS}, return_dict=False)
        start = functional.cross_entropy(start_logits, batch["start_positions"])
        end = functional.cross_entropy(end_logits, batch["end_positions"])
        return (start + end) / 2

    def num_samples(self, batch: dict[str, torch.Tensor]) -> int:
        return int(batch["input_ids"].shape[0])

    def describe(self) -> dict:
        return {
            "task": self.kind.value,
            "sample_unit": self.sample_unit,
            "seq_len": self.seq_len,
            "vocab_size": VOCAB_SIZE,
            "max_answer_tokens": MAX_ANSWER_TOKENS,
        }
