"""loader=native_gpu on the CPU (decode_jpeg on the CPU; the GPU path is proven on the H200): its crop
draws against torchvision's RandomResizedCrop, the native loader's batches, the sharding contract,
the augmentation distributions, errors, and a 2-rank run."""

from __future__ import annotations

import math
import random

import pytest
import torch

from benchmarks.errors import ConfigError
from benchmarks.loaders.native_gpu import centre_box, random_resized_crop_box
from benchmarks.loaders.sharding import shard_batches
from tests.conftest import cpu_loader_context, ddlbench, find_run, read_summary
from tests.loaders.augment_probe import crops_of, ks_statistic, write_probe_folder


def context(path, **extra):
    return cpu_loader_context(data_path=path, **{"per_gpu_batch": 8, **extra})


def build(compose, name: str, ctx, *extra: str):
    from benchmarks.components import build_loader

    return build_loader(compose([f"loader={name}", "loader.num_workers=1", *extra])).build(ctx)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from benchmarks.data.synth import synth_imagefolder

    out = tmp_path_factory.mktemp("native_gpu") / "data"
    synth_imagefolder(out, num_classes=4, images_per_class=5, width=64, height=48, quality=90, seed=2, progress=False)
    return out


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    return write_probe_folder(tmp_path_factory.mktemp("probe"))


def test_crop_boxes_are_drawn_as_torchvision_draws_them():
    from torchvision.transforms import RandomResizedCrop

    torch.manual_seed(0)
    rng = random.Random(0)
    image = torch.zeros(3, 375, 500)
    ours = [random_resized_crop_box(375, 500, rng) for _ in range(2000)]
    theirs = [RandomResizedCrop.get_params(image, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)) for _ in range(2000)]
    for pick in (lambda b: b[2] * b[3] / (375 * 500), lambda b: math.log(b[3] / b[2]), lambda b: b[0], lambda b: b[1]):
        assert ks_statistic([pick(b) for b in ours], [pick(b) for b in theirs]) < 0.06
    assert all(0 <= t and 0 <= left and t + h <= 375 and left + w <= 500 for t, left, h, w in ours)
    # an image too narrow for any draw: the centred crop, aspect clamped to 3/4
    assert random_resized_crop_box(400, 10, random.Random(1), area=(0.99, 1.0), aspect=(1.3, 1.33)) == (196, 0, 8, 10)


def test_centre_box_is_torchvision_resize_and_centre_crop():
    assert centre_box(375, 500, size=224) == ((256, 341), (16, 58, 224, 224))
    assert centre_box(500, 375, size=224) == ((341, 256), (58, 16, 224, 224))


def test_eval_batches_equal_the_native_loader(compose, folder):
    """augment=false: the same files through PIL + torchvision and through decode_jpeg + interpolate."""
    batches = []
    for name in ("native", "native_gpu"):
        epoch = build(compose, name, context(folder), "loader.augment=false", "loader.shuffle=false")
        epoch.set_epoch(0)
        batches.append(list(epoch))
    assert len(batches[0]) == len(batches[1])
    for (a, la), (b, lb) in zip(*batches):
        assert torch.equal(la, lb)
        assert a.shape == b.shape and a.shape[1:] == (3, 32, 32)
        # two resize implementations (PIL's and torch's antialiased bilinear): close, not equal
        assert (a - b).abs().mean() < 0.05, (a - b).abs().mean()


@pytest.mark.parametrize("world_size, per_gpu_batch", [(2, 2), (3, 2), (3, 4)])
def test_sharding_contract(compose, folder, world_size, per_gpu_batch):
    num = 20
    expected = len(shard_batches(list(range(num)), rank=0, world_size=world_size, per_gpu_batch=per_gpu_batch))
    epochs = [
        build(compose, "native_gpu", context(folder, rank=r, world_size=world_size, per_gpu_batch=per_gpu_batch))
        for r in range(world_size)
    ]
    for e in range(2):
        counts = []
        for epoch in epochs:
            epoch.set_epoch(e)
            steps = [labels.shape[0] for _, labels in epoch]
            assert len(steps) == len(epoch) == expected
            counts.append(sum(steps))
        assert sum(counts) == num


def test_crops_and_flips_are_distributed_as_the_native_loader_draws_them(compose, probe):
    native = crops_of(build(compose, "native", context(probe, image_size=64)), epochs=6)
    gpu = crops_of(build(compose, "native_gpu", context(probe, image_size=64)), epochs=6)
    assert len(native) == len(gpu) == 300
    for index in (0, 1):  # area share, aspect
        values = [[c[index] for c in crops] for crops in (native, gpu)]
        assert ks_statistic(*values) < 0.15, (index, ks_statistic(*values))
    rates = [sum(c[2] for c in crops) / len(crops) for crops in (native, gpu)]
    assert abs(rates[0] - rates[1]) < 0.12 and all(0.35 < r < 0.65 for r in rates), rates
    # the probe can tell a different augmentation apart: crops of at least half the image are not these
    rng = random.Random(5)
    narrow = [
        b[2] * b[3] / (180 * 240) for b in (random_resized_crop_box(180, 240, rng, area=(0.5, 1.0)) for _ in range(300))
    ]
    assert ks_statistic([c[0] for c in native], narrow) > 0.3


@pytest.mark.parametrize("augment", ["true", "false"])
def test_cpu_decode_share_does_not_change_the_batches(compose, folder, augment):
    """Decode is on the CPU either way here, so whichever side (worker or decode thread) decodes an image,
    every batch is the same for the same seed: the crops and flips do not depend on the share."""
    runs = []
    for share in ("0", "0.3", "0.5", "1"):
        epoch = build(
            compose, "native_gpu", context(folder), f"loader.cpu_decode_share={share}", f"loader.augment={augment}"
        )
        runs.append([])
        for e in range(2):
            epoch.set_epoch(e)
            runs[-1] += list(epoch)
    for other in runs[1:]:
        assert len(other) == len(runs[0])
        for (a, la), (b, lb) in zip(runs[0], other):
            assert torch.equal(la, lb) and torch.equal(a, b)


def test_workers_hand_over_the_first_share_decoded_and_the_rest_encoded(folder):
    from benchmarks.loaders.native_gpu import collate_encoded, decode_cpu, read_bytes, split_encoded, upload_decoded

    files = sorted(folder.rglob("*.jpg"))[:5]
    samples = [(read_bytes(str(f)), n) for n, f in enumerate(files)]
    batch = collate_encoded(samples, cpu_decode_share=0.5)  # round(2.5) = 2
    assert batch.shapes.tolist() == [[3, 48, 64]] * 2 and batch.labels.tolist() == [0, 1, 2, 3, 4]
    decoded = upload_decoded(batch.pixels, batch.shapes, torch.device("cpu"))
    rest = [bytes(t.numpy()) for t in split_encoded(batch.joined, batch.lengths)]
    assert rest == [data for data, _ in samples[2:]]
    expected = decode_cpu([torch.frombuffer(bytearray(data), dtype=torch.uint8) for data, _ in samples[:2]])
    assert all(torch.equal(a, b) for a, b in zip(decoded, expected))
    none, every = collate_encoded(samples), collate_encoded(samples, cpu_decode_share=1.0)
    assert none.shapes.shape == (0, 3) and none.lengths.tolist() == [len(d) for d, _ in samples]
    assert every.shapes.shape == (5, 3) and every.lengths.numel() == every.joined.numel() == 0


def test_a_folder_without_jpegs_is_a_one_line_error(compose, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.png").write_bytes(b"\x89PNG")
    with pytest.raises(ConfigError, match="loader=native_gpu decodes JPEGs"):
        build(compose, "native_gpu", context(tmp_path))


@pytest.mark.multiproc
def test_two_rank_run_with_native_gpu_completes(tmp_path, folder):
    result = ddlbench(
        "run",
        "loader=native_gpu",
        f"data.path={folder}",
        "model=simple_cnn",
        "system.ranks_per_node=2",
        "run.per_gpu_batch=4",
        "run.steps=4",
        "run.warmup_steps=1",
        f"run.root={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    summary = read_summary(find_run(tmp_path / "default", "ddp-native_gpu-simple_cnn-g2-n1-b4-r0"))
    assert summary["status"] == "completed" and summary["throughput_img_s"] > 0


def test_a_batch_of_mixed_sizes_is_cropped_as_each_image_alone():
    """Images of several shapes go through roi_align a shape at a time: no zero padding bleeds into the
    crops near an image's edge, and the order of the batch is kept."""
    from benchmarks.loaders.native_gpu import transform_batch

    torch.manual_seed(0)
    images = [torch.randint(0, 256, shape, dtype=torch.uint8) for shape in ((3, 40, 60), (3, 64, 48), (3, 40, 60))]
    batch = transform_batch(images, size=16, augment=False, rng=random.Random(0))
    alone = torch.cat([transform_batch([image], size=16, augment=False, rng=random.Random(0)) for image in images])
    assert batch.shape == (3, 3, 16, 16) and torch.allclose(batch, alone)
