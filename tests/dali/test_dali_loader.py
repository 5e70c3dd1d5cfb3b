"""The DALI loader on the CPU with real DALI: the sharding contract (shared with the native loader),
the same batches as the native loader, file and TFRecord readers agreeing, errors, and a 2-rank run."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchmarks.errors import ConfigError
from benchmarks.loaders.sharding import epoch_permutation, shard_batches
from tests.conftest import find_run, read_summary
from tests.dali.conftest import NUM_IDS, loader_context

LOADERS = ["native", "dali-file", "dali-tfrecord"]


def build(compose, loader: str, ctx, *extra: str):
    """The loader option exactly as a run builds it: composed from conf/loader/*.yaml."""
    from benchmarks.adapters import build_loader

    if loader == "native":
        overrides = ["loader=native", "loader.num_workers=0", *extra]
    else:
        overrides = ["loader=dali", f"loader.reader={loader.split('-')[1]}", "loader.num_threads=1", *extra]
    return build_loader(compose(overrides)).build(ctx)


@pytest.mark.parametrize("world_size, per_gpu_batch", [(2, 2), (3, 2), (3, 3), (2, 5), (3, 4)])
@pytest.mark.parametrize("loader", LOADERS)
def test_sharding_contract(compose, loader, world_size, per_gpu_batch, id_folder, id_tfrecords):
    """Each epoch: ranks' samples are disjoint, their union is the dataset, every rank runs the same
    number of steps, and that number is what sharding.shard_batches gives. Labels are identities."""
    path = id_tfrecords if loader == "dali-tfrecord" else id_folder
    expected_steps = len(
        shard_batches(list(range(NUM_IDS)), rank=0, world_size=world_size, per_gpu_batch=per_gpu_batch)
    )
    epochs = [
        build(
            compose,
            loader,
            loader_context(rank=rank, world_size=world_size, per_gpu_batch=per_gpu_batch, data_path=path),
        )
        for rank in range(world_size)
    ]
    for epoch in range(3):  # DALI rotates shards over ranks each epoch
        seen = []
        for rank_epoch in epochs:
            rank_epoch.set_epoch(epoch)
            labels = [batch_labels.tolist() for _, batch_labels in rank_epoch]
            assert len(labels) == len(rank_epoch) == expected_steps, (epoch, labels)
            assert all(labels), "an empty batch"
            seen.append([i for batch in labels for i in batch])
        flat = [i for rank_ids in seen for i in rank_ids]
        assert len(flat) == len(set(flat)), f"epoch {epoch}: a sample on two ranks or twice: {seen}"
        assert sorted(flat) == list(range(NUM_IDS)), f"epoch {epoch}: samples missing: {seen}"


def test_an_abandoned_epoch_does_not_leak_into_the_next(compose, id_folder):
    epoch = build(compose, "dali-file", loader_context(world_size=1, per_gpu_batch=2, data_path=id_folder))
    epoch.set_epoch(0)
    next(iter(epoch))  # the loop stopped after one step
    epoch.set_epoch(1)
    labels = sorted(i for _, batch in epoch for i in batch.tolist())
    assert labels == list(range(NUM_IDS))


@pytest.mark.parametrize("augment", [True, False])
@pytest.mark.parametrize("channels_last", [False, True])
def test_dali_and_native_batches_look_the_same(compose, small_folder, augment, channels_last):
    ctx = loader_context(
        per_gpu_batch=8, data_path=small_folder, image_size=32, channels_last=channels_last, num_classes=4
    )
    flag = f"loader.augment={str(augment).lower()}"
    native, dali = build(compose, "native", ctx, flag), build(compose, "dali-file", ctx, flag)
    assert len(native) == len(dali) == 3
    low = min((0 - m) / s for m, s in zip((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)))
    high = max((1 - m) / s for m, s in zip((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)))
    label_sets, channel_means = [], []
    for epoch in (native, dali):
        epoch.set_epoch(0)
        batches = list(epoch)
        images, labels = batches[0]
        assert images.shape == (8, 3, 32, 32) and images.dtype == torch.float32
        assert images.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        assert labels.dtype == torch.int64 and labels.shape == (8,)
        everything = torch.cat([b for b, _ in batches])
        assert low - 1e-3 <= everything.min() and everything.max() <= high + 1e-3
        label_sets.append(sorted({i for _, b in batches for i in b.tolist()}))
        channel_means.append(everything.mean(dim=(0, 2, 3)))
    assert label_sets[0] == label_sets[1] == [0, 1, 2, 3]
    # the same images through two resize implementations: per-channel means agree closely
    assert torch.allclose(channel_means[0], channel_means[1], atol=0.15 if augment else 0.03), channel_means


def test_tfrecord_and_file_readers_give_the_same_images(compose, id_folder, id_tfrecords):
    images_by_reader = []
    for loader, path in (("dali-file", id_folder), ("dali-tfrecord", id_tfrecords)):
        epoch = build(
            compose,
            loader,
            loader_context(per_gpu_batch=4, data_path=path),
            "loader.augment=false",
            "loader.shuffle=false",
        )
        epoch.set_epoch(0)
        by_label = {int(label): image for images, labels in epoch for image, label in zip(images, labels)}
        assert sorted(by_label) == list(range(NUM_IDS))
        images_by_reader.append(by_label)
    for label in range(NUM_IDS):
        assert torch.equal(images_by_reader[0][label], images_by_reader[1][label]), f"record {label} differs"


def test_native_loader_order_is_the_sharding_permutation(compose, id_folder):
    """The shared contract test above holds native to shard_batches; this pins its order too."""
    epoch = build(
        compose,
        "native",
        loader_context(rank=1, world_size=2, per_gpu_batch=2, data_path=id_folder),
        "loader.augment=false",
    )
    epoch.set_epoch(1)
    order = epoch_permutation(NUM_IDS, seed=0, epoch=1, shuffle=True)
    assert [b.tolist() for _, b in epoch] == shard_batches(order, rank=1, world_size=2, per_gpu_batch=2)


def test_missing_index_file_is_a_one_line_error(compose, id_tfrecords, tmp_path):
    broken = tmp_path / "no_index"
    broken.mkdir()
    for record in id_tfrecords.glob("*.tfrecord"):
        (broken / record.name).write_bytes(record.read_bytes())
    with pytest.raises(ConfigError, match=r"has no DALI index .*tfrecord2idx") as error:
        build(compose, "dali-tfrecord", loader_context(data_path=broken))
    assert "\n" not in str(error.value)


def test_wrong_reader_for_the_folder_names_the_fix(compose, id_folder, id_tfrecords):
    with pytest.raises(ConfigError, match=r"no \*\.tfrecord files for loader.reader=tfrecord; .*ddlbench data convert"):
        build(compose, "dali-tfrecord", loader_context(data_path=id_folder))
    with pytest.raises(
        ConfigError, match=r"no <class>/<image>.jpg files for loader.reader=file; .*loader.reader=tfrecord"
    ):
        build(compose, "dali-file", loader_context(data_path=id_tfrecords))


def test_bad_knobs_are_one_line_errors(compose):
    from benchmarks.adapters import build_loader

    for override, pattern in (
        ("loader.reader=lmdb", r"loader.reader=lmdb is not allowed; choose file or tfrecord"),
        ("loader.decoder_device=gpu", r"loader.decoder_device=gpu is not allowed; choose auto, mixed or cpu"),
        ("loader.hw_decoder_load=1.5", r"loader.hw_decoder_load=1.5 must be between 0 and 1"),
    ):
        with pytest.raises(ConfigError, match=pattern):
            build_loader(compose(["loader=dali", override]))


def test_mixed_decoder_without_a_gpu_names_the_fix(compose, id_folder):
    with pytest.raises(ConfigError, match=r"decoder_device=mixed needs a CUDA device; use loader.decoder_device=auto"):
        build(compose, "dali-file", loader_context(data_path=id_folder), "loader.decoder_device=mixed")


def test_missing_dali_names_the_install_command(monkeypatch):
    import sys

    from benchmarks.loaders import dali
    from benchmarks.loaders.configs import DaliLoaderConfig

    monkeypatch.setitem(sys.modules, "nvidia.dali", None)  # import nvidia.dali now raises ImportError
    with pytest.raises(ConfigError, match=r"loader=dali needs nvidia-dali .*make dali"):
        dali.DaliLoader(DaliLoaderConfig(num_threads=2))


@pytest.mark.parametrize("reader", ["file", "tfrecord"])
def test_two_rank_ddp_run_with_dali_completes(tmp_path, id_folder, id_tfrecords, reader, ddlbench):
    path: Path = id_tfrecords if reader == "tfrecord" else id_folder
    result = ddlbench(
        "run",
        "loader=dali",
        f"loader.reader={reader}",
        f"data.path={path}",
        "model=simple_cnn",
        f"model.num_classes={NUM_IDS}",
        "run.steps=4",
        "run.warmup_steps=1",
        "run.per_gpu_batch=2",
        f"run.root={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = find_run(tmp_path / "default", "ddp-dali-simple_cnn-g2-n1-b2-r0")
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and summary["world_size"] == 2 and summary["measured_steps"] == 4


def test_wrong_cuda_flavour_names_the_wheel_to_install(monkeypatch):
    from importlib import metadata

    from benchmarks.loaders import dali

    real_version = metadata.version

    def version(dist: str) -> str:
        if dist == "nvidia-dali-cuda130":
            return "2.4.0"
        if dist in dali.FLAVOURS:
            raise metadata.PackageNotFoundError(dist)
        return real_version(dist)

    monkeypatch.setattr(dali.metadata, "version", version)
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    with pytest.raises(
        ConfigError,
        match=r"nvidia-dali-cuda130 is installed but torch uses CUDA 12.8; "
        r"pip uninstall nvidia-dali-cuda130 && pip install nvidia-dali-cuda120",
    ):
        dali._import_dali(need_gpu=True)
    dali._import_dali(need_gpu=False)  # a CPU run does not care which CUDA the wheel was built for


def test_dali_crops_and_flips_are_distributed_as_the_native_loader_draws_them(compose, tmp_path):
    """Equal augmentation across loaders: on the same gradient images (tests/loaders/augment_probe.py)
    the crop areas, aspects and flip rate of DALI's random resized crop match torchvision's."""
    from tests.loaders.augment_probe import crops_of, ks_statistic, write_probe_folder

    probe = write_probe_folder(tmp_path)
    ctx = loader_context(per_gpu_batch=10, data_path=probe, image_size=64, num_classes=1)
    native, dali = (crops_of(build(compose, loader, ctx), epochs=6) for loader in ("native", "dali-file"))
    assert len(native) == len(dali) == 300
    for index, what in ((0, "area share"), (1, "aspect")):
        gap = ks_statistic([c[index] for c in native], [c[index] for c in dali])
        assert gap < 0.15, f"{what}: KS statistic {gap:.3f}"
    rates = [sum(c[2] for c in crops) / len(crops) for crops in (native, dali)]
    assert abs(rates[0] - rates[1]) < 0.12 and all(0.35 < r < 0.65 for r in rates), rates
