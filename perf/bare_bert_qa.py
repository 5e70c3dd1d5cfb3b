"""A bare BERT question-answering training loop: the reference `ddlbench run model=bert` is held to.

Measures sequences/s of plain PyTorch training (no ddlbench loop, timers, logs or framework wrapper) on
one device: transformers' BertForQuestionAnswering built from a BertConfig (the shapes of
benchmarks/models/bert.py), bf16 autocast, torch AdamW (lr 3e-5, weight decay 0.01, torch's defaults
otherwise: what `optim.name=adamw` builds), the mean of the start and end cross-entropies (as
benchmarks/tasks/question_answering.py), on NUM_BATCHES synthetic SQuAD-shaped batches made once on the
device and cycled (as loader=synthetic): random WordPiece ids padded from a random length between half
and all of --seq-len, attention mask, token types (question, context) and an answer span of up to 30
tokens. The time is the host's wall time over --steps steps after --warmup steps, between two
torch.cuda.synchronize() calls.

  python perf/bare_bert_qa.py --size large --batch 32 --seq-len 384 --warmup 10 --steps 30
  python perf/bare_bert_qa.py --device cpu --size tiny --batch 2 --seq-len 64 --warmup 1 --steps 2  # a check

Prints one RESULT line; --json FILE also writes it as a JSON object (perf/references_gpu.sh reads it).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch.nn import functional
from transformers import BertConfig, BertForQuestionAnswering

SIZES = {
    "tiny": (2, 128, 2, 512),
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}  # layers, hidden, heads, ffn
VOCAB = 30522
NUM_BATCHES = 4


def synthetic_batch(batch: int, seq_len: int, device: torch.device, g: torch.Generator) -> dict[str, torch.Tensor]:
    """Padded question + context sequences and their answer spans."""
    rand = lambda: torch.rand(batch, generator=g)  # noqa: E731
    length = torch.randint(max(2, seq_len // 2), seq_len + 1, (batch,), generator=g)
    question = 1 + (rand() * (length // 4).clamp(min=1)).long()
    start = question + (rand() * (length - question)).long()
    end = start + (rand() * (torch.minimum(length, start + 30) - start)).long()
    pos = torch.arange(seq_len)
    inside = pos < length[:, None]
    tensors = {
        "input_ids": torch.randint(VOCAB, (batch, seq_len), generator=g) * inside,
        "attention_mask": inside.long(),
        "token_type_ids": ((pos >= question[:, None]) & inside).long(),
        "start_positions": start,
        "end_positions": end,
    }
    return {k: v.to(device) for k, v in tensors.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="large", choices=SIZES)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=384)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--json", help="also write the result here")
    args = p.parse_args()
    device = torch.device(args.device)

    torch.manual_seed(0)
    layers, hidden, heads, ffn = SIZES[args.size]
    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=ffn,
        max_position_embeddings=512,
    )
    model = BertForQuestionAnswering(config).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5, weight_decay=0.01)
    g = torch.Generator().manual_seed(0)
    batches = [synthetic_batch(args.batch, args.seq_len, device, g) for _ in range(NUM_BATCHES)]
    inputs = ("input_ids", "attention_mask", "token_type_ids")

    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
        b = batches[step % NUM_BATCHES]
        with torch.autocast(device.type, dtype=torch.bfloat16):
            start_logits, end_logits = model(**{k: b[k] for k in inputs}, return_dict=False)
            loss = (
                functional.cross_entropy(start_logits, b["start_positions"])
                + functional.cross_entropy(end_logits, b["end_positions"])
            ) / 2
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start

    result = {
        "script": "bare_bert_qa",
        "size": args.size,
        "batch": args.batch,
        "seq_len": args.seq_len,
        "warmup": args.warmup,
        "steps": args.steps,
        "seconds": seconds,
        "samples_per_s": args.batch * args.steps / seconds,
        "unit": "seq/s",
        "last_loss": float(loss.detach()),
        "peak_allocated_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
    }
    print(
        f"RESULT bare_bert_qa {args.size} b{args.batch} seq{args.seq_len}: {result['samples_per_s']:,.1f} seq/s "
        f"over {args.steps} steps ({seconds:.2f} s) after {args.warmup} warm-up, last loss {result['last_loss']:.3f}",
        flush=True,
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
