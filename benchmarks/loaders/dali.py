"""NVIDIA DALI: read, decode, crop, flip and normalise in a DALI pipeline (the only module that imports
nvidia.dali).

Augmentation contract (the same as the native loader): augment=true -> random resized crop to
image_size (area 8-100%, aspect 3/4-4/3) + horizontal flip with p=0.5; augment=false -> resize the
shorter side to image_size*256/224 + centre crop. Both end in float32 NCHW normalised with the ImageNet
mean/std of native.to_model_input (channels_last strides when ctx.channels_last). Decoding is `mixed`
(nvJPEG, hardware decoder share hw_decoder_load) with the rest on the GPU when the run has one, and
all on the CPU otherwise.

Readers: reader=file -> fn.readers.file over an ImageFolder (labels in torchvision's order: sorted
class folders); reader=tfrecord -> fn.readers.tfrecord over data.path/*.tfrecord with the .idx DALI
index files `ddlbench data synth --format tfrecord` / `ddlbench data convert` write.

Sharding (benchmarks/loaders/sharding.py's contract: per epoch disjoint, complete, equal steps per
rank) is done by DALI's own reader sharding, so each rank reads only its part of the files:
shard_id=rank, num_shards=world, pad_last_batch=True, and stick_to_shard=false rotates the shards
(epoch e of rank r reads shard (r+e) mod W). Shard k is [N*k//W, N*(k+1)//W) of the reader's
(seeded, rank-independent) shuffled list, so shard sizes differ by at most one. This module knows the
size s of the shard each rank reads in each epoch, and
  - trims the padding (DALI repeats the shard's last sample to fill the last batch),
  - runs K = ceil((N//W) / B) steps on every rank: a rank whose shard holds one sample more than
    K*B gets it as a last, 1-sample DALI batch, which is appended to step K (a batch of B+1), exactly
    as sharding.shard_batches does with a tail smaller than the world size.
K therefore equals the native loader's steps per epoch. The order inside an epoch is DALI's (a
global shuffle of the file list, then a shuffle buffer of initial_fill samples), not
sharding.epoch_permutation's; set_epoch only keeps the reader's epochs in step with the loop's.
"""

from __future__ import annotations

import math
import os
import sys
from collections import deque
from collections.abc import Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from benchmarks.adapter_config import Installation
from benchmarks.errors import ConfigError
from benchmarks.loaders.base import LoaderContext
from benchmarks.loaders.configs import DaliLoaderConfig
from benchmarks.loaders.native import IMAGENET_MEAN, IMAGENET_STD

READER_NAME = "Reader"
# CUDA maps every stream onto one of CUDA_DEVICE_MAX_CONNECTIONS hardware work queues (default 8). DALI's
# mixed decoder uses ~24 streams; one that shares a queue with training's stream waits behind it, and a
# batch comes late every few steps (docs/dali.md has the measurements). The variable must be set before
# CUDA starts, so the loader can only say so.
MIN_NUM_HW_QUEUES = 32
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".JPG", ".JPEG", ".PNG")
FLAVOURS = {"nvidia-dali-cuda110": 11, "nvidia-dali-cuda120": 12, "nvidia-dali-cuda130": 13}
INSTALL_HINT = "run 'make dali' (pip install -e '.[dali-cuda130,tfrecord]'; '.[dali]' on CUDA 12 machines)"


def _installed(dist: str) -> bool:
    try:
        metadata.version(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


def _import_dali(*, need_gpu: bool) -> Any:
    """nvidia.dali, or a one-line ConfigError saying how to install the flavour this torch needs."""
    installed = {}
    for dist in FLAVOURS:
        try:
            installed[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    if len(installed) > 1:
        raise ConfigError(
            f"loader=dali: several DALI flavours are installed ({', '.join(sorted(installed))}) and overwrite "
            "each other; pip uninstall all but the one matching torch's CUDA, then " + INSTALL_HINT
        )
    try:
        import nvidia.dali  # noqa: F401
    except ImportError as error:
        raise ConfigError(f"loader=dali needs nvidia-dali ({error}); {INSTALL_HINT}") from None
    torch_cuda = torch.version.cuda
    if need_gpu and installed and torch_cuda:
        (dist,) = installed
        wanted = int(torch_cuda.split(".")[0])
        if FLAVOURS[dist] != wanted:
            raise ConfigError(
                f"loader=dali: {dist} is installed but torch uses CUDA {torch_cuda}; "
                f"pip uninstall {dist} && pip install nvidia-dali-cuda{wanted}0"
            )
    return nvidia.dali


def hardware_queue_note(environ: Mapping[str, str]) -> str | None:
    """A line for rank 0 when the GPU pipeline runs with fewer hardware work queues than MIN_NUM_HW_QUEUES."""
    value = environ.get("CUDA_DEVICE_MAX_CONNECTIONS")
    if value is not None and value.isdigit() and int(value) >= MIN_NUM_HW_QUEUES:
        return None
    # an override sets a key the system config has; '+' adds one it lacks (benchmarks/config.py)
    override = f"{'+' if value is None else ''}system.env.CUDA_DEVICE_MAX_CONNECTIONS={MIN_NUM_HW_QUEUES}"
    return (
        f"[ddlbench] note: loader=dali on the GPU with CUDA_DEVICE_MAX_CONNECTIONS={value or '8 (unset)'}: DALI's "
        f"streams share hardware queues with training's and batches come late (2 H200: 0.88 of synthetic speed "
        f"instead of 0.96); pass {override}, or export CUDA_DEVICE_MAX_CONNECTIONS={MIN_NUM_HW_QUEUES} where the "
        f"ranks start"
    )


def list_imagefolder(root: str) -> tuple[list[str], list[int], list[str]]:
    """(files, labels, classes) of an ImageFolder in torchvision's order: sorted classes, sorted files."""
    classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    files, labels = [], []
    for label, name in enumerate(classes):
        for file in sorted(os.listdir(os.path.join(root, name))):
            if file.endswith(IMAGE_SUFFIXES):
                files.append(os.path.join(root, name, file))
                labels.append(label)
    return files, labels, classes


def shard_size(num_samples: int, *, shard: int, num_shards: int) -> int:
    """Samples in DALI reader shard `shard` of `num_shards` (DALI splits at N*k//W)."""
    return num_samples * (shard + 1) // num_shards - num_samples * shard // num_shards


def steps_per_epoch(num_samples: int, *, world_size: int, per_gpu_batch: int) -> int:
    """Every rank's steps per epoch: the smallest shard's batches (= sharding.shard_batches' count)."""
    return math.ceil((num_samples // world_size) / per_gpu_batch)


def _gpu_batch_to_torch(batch: Any, dtype: torch.dtype, device: torch.device, *, zero_copy: bool) -> torch.Tensor:
    """A DALI GPU batch as a torch tensor, ordered on torch's current stream (no host wait).
    zero_copy: the tensor is DALI's own output buffer (DLPack); DALI's dynamic executor hands out a fresh
    buffer per iteration, so nothing overwrites it. Otherwise a copy into torch memory, which also makes
    DALI's stream wait for the copy on torch's stream, tying DALI's later GPU work to training's."""
    tensor = batch.as_tensor()
    if zero_copy:
        with torch.cuda.device(device):
            return torch.from_dlpack(tensor)
    from nvidia.dali.plugin.pytorch import feed_ndarray

    out = torch.empty(tensor.shape(), dtype=dtype, device=device)
    feed_ndarray(tensor, out, cuda_stream=torch.cuda.current_stream(device))
    return out


class DaliEpoch:
    def __init__(
        self, ctx: LoaderContext, pipe: Any, *, num_samples: int, config: DaliLoaderConfig, decoder: dict
    ) -> None:
        """decoder: what the pipeline's decoder turned out to be (mixed or cpu), for describe()."""
        self.ctx, self.pipe, self.num_samples, self.config, self.decoder = ctx, pipe, num_samples, config, decoder
        self.stick_to_shard, self.gpu_outputs = config.stick_to_shard, decoder["decoder"] == "mixed"
        self._steps = steps_per_epoch(num_samples, world_size=ctx.world_size, per_gpu_batch=ctx.per_gpu_batch)
        self._reader_epoch = 0  # the DALI reader epoch the next pipe.run() belongs to
        self._runs_left = self._runs_in(0)  # DALI batches of that epoch not yet taken
        self._wanted_epoch = 0
        # zero-copy batches the GPU may still read: (event after the steps that used them, batches), oldest
        # first; and the batches handed out for the current step
        self._in_use: deque[tuple[torch.cuda.Event, list[tuple[torch.Tensor, torch.Tensor]]]] = deque()
        self._handed_out: list[tuple[torch.Tensor, torch.Tensor]] = []

    def _shard_samples(self, epoch: int) -> int:
        shard = self.ctx.rank if self.stick_to_shard else (self.ctx.rank + epoch) % self.ctx.world_size
        return shard_size(self.num_samples, shard=shard, num_shards=self.ctx.world_size)

    def _runs_in(self, epoch: int) -> int:  # the same for every epoch; named for what it counts
        # pad_last_batch pads EVERY shard to the batches of the largest one: a smaller shard may end
        # in a batch made only of repeats
        largest = math.ceil(self.num_samples / self.ctx.world_size)
        return math.ceil(largest / self.ctx.per_gpu_batch)

    def __len__(self) -> int:
        return self._steps

    def set_epoch(self, epoch: int) -> None:
        if epoch < self._reader_epoch:
            raise RuntimeError(f"DALI readers only go forward: epoch {epoch} after epoch {self._reader_epoch}")
        self._wanted_epoch = epoch

    def _run(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The next DALI batch as torch tensors; on the GPU they are ordered on torch's current stream."""
        if self.gpu_outputs and self.config.zero_copy:
            # outputs on torch's stream: DALI queues a stream wait instead of blocking the host until the
            # batch is ready, so a late batch costs GPU idle time only, never the host's lead
            images, labels = self.pipe.run(torch.cuda.current_stream(self.ctx.device).cuda_stream)
        else:
            images, labels = self.pipe.run()
        self._runs_left -= 1
        if self.gpu_outputs:
            zero_copy = self.config.zero_copy
            batch = (
                _gpu_batch_to_torch(images, torch.float32, self.ctx.device, zero_copy=zero_copy),
                _gpu_batch_to_torch(labels, torch.int64, self.ctx.device, zero_copy=zero_copy).view(-1),
            )
            if zero_copy:
                self._handed_out.append(batch)
            return batch
        import numpy as np

        return (
            torch.from_numpy(np.array(images.as_tensor())),
            torch.from_numpy(labels.as_array().reshape(-1).astype("int64")),
        )

    def _retire_previous_step(self) -> None:
        """Keeps DALI's buffers alive until the GPU work queued on them is done. A zero-copy batch is DALI
        memory, which returns to DALI once the torch tensors die, and the host queues work ahead of the
        GPU. Called as the next step begins, when all the previous step's work is queued: its batches are
        held until an event recorded now completes."""
        if self._handed_out:
            done = torch.cuda.Event()
            done.record(torch.cuda.current_stream(self.ctx.device))
            self._in_use.append((done, self._handed_out))
            self._handed_out = []
        while self._in_use and self._in_use[0][0].query():
            self._in_use.popleft()

    def _finish_reader_epoch(self) -> None:
        while self._runs_left > 0:  # an abandoned epoch: its padded batches are still in the reader
            self.pipe.run()
            self._runs_left -= 1
        self._reader_epoch += 1
        self._runs_left = self._runs_in(self._reader_epoch)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        if self._runs_left != self._runs_in(self._reader_epoch):
            self._finish_reader_epoch()  # the previous iteration stopped early
        while self._reader_epoch < self._wanted_epoch:
            self._finish_reader_epoch()
        epoch, batch = self._reader_epoch, self.ctx.per_gpu_batch
        shard = self._shard_samples(epoch)
        taken = 0
        for step in range(self._steps):
            self._retire_previous_step()
            images, labels = self._run()
            real = min(batch, shard - taken)
            images, labels = images[:real], labels[:real]
            taken += real
            if step == self._steps - 1 and taken < shard:
                # the one sample beyond K*B: its own DALI batch, appended to the last step
                extra_images, extra_labels = self._run()
                images = torch.cat([images, extra_images[: shard - taken]])
                labels = torch.cat([labels, extra_labels[: shard - taken]])
                taken = shard
            yield self._to_model(images, labels)
        assert taken == shard and self._runs_left >= 0, (taken, shard, self._runs_left)
        self._finish_reader_epoch()  # drops the batches of pure padding, if any

    def _to_model(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        device = self.ctx.device
        if self.ctx.channels_last:
            images = images.permute(0, 3, 1, 2)  # HWC from DALI: NCHW shape with channels_last strides
        images = images.to(device, non_blocking=True)
        if self.ctx.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        return images, labels.to(device, non_blocking=True)

    def describe(self) -> dict:
        import nvidia.dali

        return {
            "loader": "dali",
            "num_samples": self.num_samples,
            "dali_version": nvidia.dali.__version__,
            "cpu_count": os.cpu_count(),
            "sharding": "dali reader shards, padded and trimmed",
            **self.config.described(),
            **self.decoder,
        }


class DaliLoader:
    @classmethod
    def installation(cls) -> Installation:
        try:
            _import_dali(need_gpu=torch.cuda.is_available())
        except ConfigError as error:
            return Installation(ok=False, detail=str(error).split(";")[0], fix=INSTALL_HINT)
        versions = [f"{dist} {metadata.version(dist)}" for dist in FLAVOURS if _installed(dist)]
        return Installation(ok=True, detail=", ".join(versions) or "installed")

    def __init__(self, config: DaliLoaderConfig) -> None:
        config.check()
        self.config = config
        _import_dali(need_gpu=False)  # fail before any process group exists

    def _reader(self, fn: Any, ctx: LoaderContext, common: dict) -> tuple[Any, Any]:
        path = ctx.data_path
        if not path or not os.path.isdir(path):
            raise ConfigError(
                f"data.path={path!r} is not a directory; make one with 'ddlbench data synth --out DIR' "
                "(add --format tfrecord for loader.reader=tfrecord) and pass data.path=DIR"
            )
        if self.config.reader == "file":
            files, labels, _ = list_imagefolder(path)
            if not files:
                raise ConfigError(
                    f"data.path={path} holds no <class>/<image>.jpg files for loader.reader=file; "
                    "pass an ImageFolder, or loader.reader=tfrecord for a TFRecord folder"
                )
            if (chosen := ctx.indices(len(files))) is not None:  # a validation split of the file list
                files, labels = [files[i] for i in chosen], [labels[i] for i in chosen]
            return fn.readers.file(files=files, labels=labels, **common)
        if ctx.holdout:
            raise ConfigError(
                "data.val_split needs loader.reader=file (a TFRecord folder cannot be split by position); "
                "pass data.val_path=<a TFRecord folder of held-out samples> instead"
            )
        from nvidia.dali import tfrecord

        from benchmarks.data.tfrecord import check_indexes, find_tfrecords

        pairs = find_tfrecords(Path(path))
        if not pairs:
            raise ConfigError(
                f"data.path={path} holds no *.tfrecord files for loader.reader=tfrecord; write them with "
                f"'ddlbench data convert --from IMAGEFOLDER --out DIR', or use loader.reader=file"
            )
        check_indexes(path, pairs)
        features = fn.readers.tfrecord(
            path=[str(r) for r, _ in pairs],
            index_path=[str(i) for _, i in pairs],
            features={
                "image/encoded": tfrecord.FixedLenFeature((), tfrecord.string, ""),
                "image/class/label": tfrecord.FixedLenFeature([1], tfrecord.int64, -1),
            },
            **common,
        )
        return features["image/encoded"], features["image/class/label"]

    def build(self, ctx: LoaderContext) -> DaliEpoch:
        k = ctx.for_split(self.config)
        cuda = ctx.device.type == "cuda"
        if k.decoder_device == "mixed" and not cuda:
            raise ConfigError("loader.decoder_device=mixed needs a CUDA device; use loader.decoder_device=auto or cpu")
        mixed = cuda and k.decoder_device in ("auto", "mixed")
        dali = _import_dali(need_gpu=cuda)
        from nvidia.dali import fn, types

        size = ctx.image_size
        mean, std = list(IMAGENET_MEAN), list(IMAGENET_STD)
        op_device = "gpu" if mixed else "cpu"
        decoder_args: dict[str, Any] = {"device": "mixed" if mixed else "cpu", "output_type": types.RGB}
        if mixed:
            # the sizes NVIDIA's ResNet-50 example preallocates, so nvJPEG does not reallocate mid-run
            decoder_args.update(
                hw_decoder_load=k.hw_decoder_load, device_memory_padding=211_025_920, host_memory_padding=140_544_512
            )
        common = dict(
            shard_id=ctx.rank,
            num_shards=ctx.world_size,
            pad_last_batch=True,
            random_shuffle=k.shuffle,
            stick_to_shard=k.stick_to_shard,
            initial_fill=k.initial_fill,
            name=READER_NAME,
        )

        @dali.pipeline_def
        def pipeline():
            jpegs, labels = self._reader(fn, ctx, common)
            if k.augment:
                images = fn.decoders.image_random_crop(
                    jpegs, random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3], num_attempts=100, **decoder_args
                )
                images = fn.resize(images, device=op_device, resize_x=size, resize_y=size)
                mirror = fn.random.coin_flip(probability=0.5)
                crop: dict[str, Any] = {}
            else:
                images = fn.decoders.image(jpegs, **decoder_args)
                images = fn.resize(images, device=op_device, resize_shorter=size * 256 // 224)
                mirror, crop = 0, {"crop": (size, size), "crop_pos_x": 0.5, "crop_pos_y": 0.5}
            images = fn.crop_mirror_normalize(
                images,
                device=op_device,
                dtype=types.FLOAT,
                mean=mean,
                std=std,
                mirror=mirror,
                output_layout="HWC" if ctx.channels_last else "CHW",
                **crop,
            )
            if mixed:
                # labels leave with the images, on the GPU: copying them from pageable host memory every
                # step can block the host (cudaMemcpyAsync is synchronous for pageable memory)
                labels = fn.cast(labels.gpu(), dtype=types.INT64)
            return images, labels

        base_seed = ctx.seed if k.seed is None else k.seed
        device_id = (
            (ctx.device.index if ctx.device.index is not None else torch.cuda.current_device()) if mixed else None
        )
        pipe = pipeline(
            batch_size=ctx.per_gpu_batch,
            num_threads=k.num_threads,
            device_id=device_id,
            prefetch_queue_depth=k.prefetch_queue_depth,
            exec_dynamic=True,  # a fresh output buffer per iteration: what zero_copy relies on
            seed=base_seed * 1_000 + ctx.rank,  # different augmentations per rank; sharding does not use it
        )
        pipe.build()
        num_samples = int(pipe.reader_meta(READER_NAME)["epoch_size"])
        if num_samples // ctx.world_size < 1:
            raise ConfigError(
                f"data.path={ctx.data_path} has {num_samples} samples but world size is {ctx.world_size}; "
                "use a larger dataset or fewer ranks"
            )
        if mixed and ctx.rank == 0 and (note := hardware_queue_note(os.environ)):
            print(note, file=sys.stderr, flush=True)
        decoder = {
            "decoder": "mixed" if mixed else "cpu",
            "cuda_device_max_connections": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS") if mixed else None,
        }
        return DaliEpoch(ctx, pipe, num_samples=num_samples, config=k, decoder=decoder)
