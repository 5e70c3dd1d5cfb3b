"""ddlbench's bookkeeping for DALI's zero-copy GPU batches, on CPU: which batches are held, and until
when. DALI itself is replaced by a stand-in pipe here (the GPU path needs a GPU); the real pipelines
are tested in test_dali_loader.py and on the H200 (docs/results/2026-11-29-h200-x2.md)."""

import torch

from benchmarks.loaders import dali
from benchmarks.loaders.base import LoaderContext
from benchmarks.loaders.configs import DaliLoaderConfig


class StandInPipe:
    """pipe.run(stream) -> (images, labels) of 4 samples, each batch numbered by its first label."""

    def __init__(self) -> None:
        self.runs = 0

    def run(self, stream=None):
        self.runs += 1
        first = 4 * (self.runs - 1)
        return torch.zeros(4, 3, 2, 2), torch.arange(first, first + 4).view(4, 1)


class Event:
    """A CUDA event whose completion the test decides."""

    done = False

    def record(self, stream) -> None:
        pass

    def query(self) -> bool:
        return Event.done


def test_a_step_that_takes_two_batches_holds_both_until_its_work_is_done(monkeypatch):
    monkeypatch.setattr(dali, "_gpu_batch_to_torch", lambda batch, dtype, device, zero_copy: batch)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: type("S", (), {"cuda_stream": 0})())
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(Event, "done", False)
    # 9 samples on 2 ranks at batch 4: rank 1's shard has 5, so its one step takes a second DALI batch
    ctx = LoaderContext(
        rank=1,
        world_size=2,
        device=torch.device("cpu"),
        per_gpu_batch=4,
        seed=0,
        num_classes=10,
        image_size=2,
        channels_last=False,
        data_path=None,
    )
    config = DaliLoaderConfig(stick_to_shard=True, zero_copy=True)
    epoch = dali.DaliEpoch(ctx, StandInPipe(), num_samples=9, config=config, decoder={"decoder": "mixed"})
    ((images, labels),) = list(epoch)
    assert labels.tolist() == [0, 1, 2, 3, 4]  # 4 from the first batch, 1 from the second
    assert len(epoch._handed_out) == 2 and not epoch._in_use  # handed out, the step's work not yet known queued

    epoch.set_epoch(1)
    batches = iter(epoch)
    next(batches)  # the next step begins: the previous step's two batches wait for its event
    assert [len(held) for _, held in epoch._in_use] == [2]
    Event.done = True  # the GPU finished that work
    epoch.set_epoch(2)
    next(iter(epoch))  # the next step begins: everything done is released
    assert not epoch._in_use
