"""BERT with a question-answering span head (BertForQuestionAnswering), built from a BertConfig: no
download, no tokenizer. The only module that imports transformers.

SIZES are the published shapes (layers, hidden size, attention heads, feed-forward size): BERT-base and
BERT-large (Devlin et al. 2019), BERT-tiny (Turc et al. 2019) for CPU tests. The rest is BertConfig's
default, which is bert-base-uncased's: a 30522-token vocabulary, 512 positions, 2 token types, GELU,
dropout 0.1. The span head is one Linear(hidden, 2) on every token (start and end logits); as in
transformers' own model there is no pooler.
"""

from __future__ import annotations

from torch import nn

from benchmarks.models.configs import BERT_MAX_SEQ_LEN, check_library

SIZES: dict[str, tuple[int, int, int, int]] = {
    "tiny": (2, 128, 2, 512),
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}
VOCAB_SIZE = 30522  # bert-base-uncased's WordPiece vocabulary (BertConfig's default)


def build(size: str) -> nn.Module:
    """BertForQuestionAnswering of this size, freshly initialised (transformers' init: normal(0, 0.02))."""
    check_library("bert")  # one line naming the package and its install command, not an ImportError
    from transformers import BertConfig, BertForQuestionAnswering

    layers, hidden, heads, feed_forward = SIZES[size]
    config = BertConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=feed_forward,
        max_position_embeddings=BERT_MAX_SEQ_LEN,
    )
    return BertForQuestionAnswering(config)
