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
from tests.conftest import cpu_loader_context, find_run, read_summary
from tests.loaders.augment_probe import crops_of, ks_statistic, write_probe_folder


def context(path, **extra):
    return cpu_loader_context(data_path=path, **{"per_gpu_batch": 8, **extra})


def build(compose, name: str, ctx, *extra: str):
    from benchmarks.adapters import build_loader

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
    from benchmarks.loaders.gpu_decode import collate_encoded, decode_cpu, read_bytes, split_encoded, upload_decoded

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


def test_two_rank_run_with_native_gpu_completes(tmp_path, folder, ddlbench):
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


def test_an_epoch_left_early_does_not_change_the_crops_of_the_next(compose, folder):
    """The crops and flips of a batch are drawn for its (seed, rank, epoch, batch): however many batches
    the decode thread made ahead before an epoch was left, the next epochs are those of a loader that
    never left one."""
    runs = []
    for leave_early in (False, True):
        epoch = build(compose, "native_gpu", context(folder), "loader.prefetch_batches=3")
        batches = []
        for e in range(3):
            epoch.set_epoch(e)
            for n, batch in enumerate(epoch):
                if e == 0 and leave_early and n == 1:
                    break
                if e > 0:
                    batches.append(batch)
        runs.append(batches)
    assert len(runs[0]) == len(runs[1]) == 2 * math.ceil(20 / 8)
    for (a, la), (b, lb) in zip(*runs):
        assert torch.equal(la, lb) and torch.equal(a, b)


def test_a_batch_of_mixed_sizes_is_cropped_as_each_image_alone():
    """Images of several shapes go through roi_align a shape at a time: no zero padding bleeds into the
    crops near an image's edge, and the order of the batch is kept."""
    from benchmarks.loaders.native_gpu import transform_batch

    torch.manual_seed(0)
    images = [torch.randint(0, 256, shape, dtype=torch.uint8) for shape in ((3, 40, 60), (3, 64, 48), (3, 40, 60))]
    batch = transform_batch(images, size=16, augment=False, rng=random.Random(0))
    alone = torch.cat([transform_batch([image], size=16, augment=False, rng=random.Random(0)) for image in images])
    assert batch.shape == (3, 3, 16, 16) and torch.allclose(batch, alone)


# loader.gpu_decoder: torchvision (the default) or nvimgcodec (nvImageCodec's hardware decoder, GPU only)


def test_gpu_decoder_torchvision_is_the_default_and_changes_nothing(compose, folder):
    """The default is torchvision at hw_decoder_load 1.0 (every baseline JPEG on the hardware, its only
    split), and naming it explicitly gives the same batches and the same settings."""
    from benchmarks.loaders.gpu_decode import TorchvisionDecoder

    loader = compose(["loader=native_gpu"]).loader
    assert (loader.gpu_decoder, loader.hw_decoder_load) == ("torchvision", 1.0)
    runs = []
    for extra in ((), ("loader.gpu_decoder=torchvision", "loader.hw_decoder_load=1.0")):
        epoch = build(compose, "native_gpu", context(folder), *extra)
        assert isinstance(epoch.decoder, TorchvisionDecoder)
        epoch.set_epoch(0)
        runs.append((list(epoch), epoch.describe()))
    (first, meta), (second, meta_again) = runs
    assert meta == meta_again and (meta["gpu_decoder"], meta["hw_decoder_load"]) == ("torchvision", 1.0)
    assert meta["gpu_decoder_library"].startswith("torchvision ")
    assert len(first) == len(second) > 0
    for (a, la), (b, lb) in zip(first, second):
        assert torch.equal(a, b) and torch.equal(la, lb)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["loader.gpu_decoder=nvimgcodec", "loader.hw_decoder_load=1.5"],
            "loader.hw_decoder_load=1.5 must be between 0 and 1 (the share of the GPU's JPEGs for its hardware "
            "decoder; DALI's here: 0.65), e.g. loader.hw_decoder_load=0.65",
        ),
        (
            ["loader.hw_decoder_load=0.65"],
            "loader.hw_decoder_load=0.65 needs loader.gpu_decoder=nvimgcodec: torchvision's decode_jpeg sends "
            "every baseline JPEG to the hardware decoder",
        ),
        (
            ["loader.gpu_decoder=nvimgcodec"],
            "loader.gpu_decoder=nvimgcodec decodes on a GPU (nvImageCodec's hardware JPEG decoder) but "
            "system.device=cpu; use loader.gpu_decoder=torchvision",
        ),
        (["loader.cpu_decode_share=-0.1"], "loader.cpu_decode_share=-0.1 must be between 0 and 1"),
    ],
)
def test_gpu_decoder_settings_are_checked_before_launch(compose, folder, overrides, expected):
    from benchmarks.validate import validate

    with pytest.raises(ConfigError) as error:
        validate(compose(["loader=native_gpu", f"data.path={folder}", *overrides]), check_device=False)
    assert expected in str(error.value) and "\n" not in str(error.value)


def test_gpu_decoder_is_a_closed_set(compose):
    with pytest.raises(ConfigError) as error:
        compose(["loader=native_gpu", "loader.gpu_decoder=nvjpeg"])
    assert "loader.gpu_decoder" in str(error.value) and "nvimgcodec" in str(error.value)


def test_gpu_decoder_nvimgcodec_on_a_cpu_run_is_a_one_line_error_before_launch(folder, tmp_path, cli):
    result = cli(
        "run", "loader=native_gpu", "loader.gpu_decoder=nvimgcodec", f"data.path={folder}", f"run.root={tmp_path}"
    )
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert "loader.gpu_decoder=nvimgcodec decodes on a GPU" in line and "system.device=cpu" in line
    assert not any(tmp_path.iterdir())  # nothing launched, no run directory


def test_gpu_decoder_nvimgcodec_without_the_package_stops_before_launch(compose, folder, monkeypatch):
    """The adapter is built before launch (ddlbench run, loaderbench): without nvidia.nvimgcodec it is one
    line with the pip command, on a GPU system too (where validate lets the setting through)."""
    import importlib.util

    from benchmarks.adapters import build_loader

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if "nvimgcodec" in name else real(name, *a))
    with pytest.raises(ConfigError) as error:
        build_loader(
            compose(["loader=native_gpu", "system=h200", "loader.gpu_decoder=nvimgcodec", f"data.path={folder}"])
        )
    message = str(error.value)
    assert message.startswith("loader.gpu_decoder=nvimgcodec needs nvImageCodec's python package")
    assert "pip install 'nvidia-nvimgcodec-cu" in message and "[nvjpeg]'" in message and "\n" not in message


def test_the_nvimgcodec_decoder_refuses_a_cpu_device():
    from benchmarks.loaders.gpu_decode import NvImageCodecDecoder

    with pytest.raises(ConfigError, match="loader.gpu_decoder=nvimgcodec decodes on a GPU"):
        NvImageCodecDecoder(torch.device("cpu"), stream=None, batch_size=8, hw_decoder_load=1.0)


def test_every_gpu_decoder_has_a_batch_decoder():
    from benchmarks.loaders.configs import GpuJpegDecoder
    from benchmarks.loaders.gpu_decode import DECODERS

    assert set(DECODERS) == set(GpuJpegDecoder)
    assert all(DECODERS[choice].name == choice.value for choice in GpuJpegDecoder)


class FakeNvImageCodec:
    """The part of nvidia.nvimgcodec the adapter uses, on the CPU: images are the tensors torchvision
    decodes, handed over through DLPack as nvImageCodec hands its own."""

    class BackendKind:
        HW_GPU_ONLY, GPU_ONLY, HYBRID_CPU_GPU, CPU_ONLY = "hw", "gpu", "hybrid", "cpu"

    class LoadHintPolicy:
        FIXED = "fixed"

    class Backend:
        def __init__(self, kind, load_hint=1.0, load_hint_policy=None):
            self.backend_kind, self.load_hint, self.load_hint_policy = kind, load_hint, load_hint_policy

    class CodeStream:
        def __init__(self, array):
            self.array = array

    class Image:
        def __init__(self, tensor):
            self.tensor = tensor

        def to_dlpack(self, stream):
            return torch.utils.dlpack.to_dlpack(self.tensor)

    class Decoder:
        def __init__(self, fail=(), layout="chw"):
            self.fail, self.layout, self.calls = set(fail), layout, []

        def decode(self, streams, params=None, cuda_stream=0):
            from torchvision.io import decode_jpeg

            self.calls.append((len(streams), cuda_stream))
            out = []
            for n, s in enumerate(streams):
                image = decode_jpeg(torch.from_numpy(s.array))
                image = image.permute(1, 2, 0).contiguous() if self.layout == "hwc" else image
                out.append(None if n in self.fail else FakeNvImageCodec.Image(image))
            return out


def test_the_hardware_decoder_takes_hw_decoder_load_of_a_batch_then_nvjpegs_cuda_decoder():
    from benchmarks.loaders.gpu_decode import nvimgcodec_backends

    backends = nvimgcodec_backends(FakeNvImageCodec, 0.65)
    assert [(b.backend_kind, b.load_hint, b.load_hint_policy) for b in backends] == [
        ("hw", 0.65, "fixed"),
        ("gpu", 1.0, "fixed"),
        ("hybrid", 1.0, "fixed"),
    ]


def test_an_nvimgcodec_batch_is_handed_over_as_decode_jpeg_hands_it(folder):
    from torchvision.io import decode_jpeg

    from benchmarks.loaders.gpu_decode import collate_encoded, decode_nvimgcodec, read_bytes, split_encoded

    files = sorted(folder.rglob("*.jpg"))[:4]
    batch = collate_encoded([(read_bytes(str(f)), 0) for f in files])
    encoded = split_encoded(batch.joined, batch.lengths)
    decoder = FakeNvImageCodec.Decoder()
    images = decode_nvimgcodec(FakeNvImageCodec, decoder, None, encoded, cuda_stream=7, consumer_stream=7)
    assert decoder.calls == [(4, 7)]  # one batched call, on the stream it is given
    assert all(torch.equal(a, b) for a, b in zip(images, decode_jpeg(encoded)))
    with pytest.raises(RuntimeError, match="1 of the batch's 4 JPEGs did not decode"):
        decode_nvimgcodec(
            FakeNvImageCodec, FakeNvImageCodec.Decoder(fail=[2]), None, encoded, cuda_stream=0, consumer_stream=0
        )
    with pytest.raises(RuntimeError, match=r"not planar RGB uint8 \(3, H, W\)"):
        decode_nvimgcodec(
            FakeNvImageCodec, FakeNvImageCodec.Decoder(layout="hwc"), None, encoded, cuda_stream=0, consumer_stream=0
        )


def test_the_real_nvimgcodec_decodes_as_decode_jpeg_on_the_cpu(folder):
    """With nvidia.nvimgcodec installed, its own API as the adapter calls it (code streams over the worker's
    bytes, planar RGB, DLPack), on its CPU backend: the pixels decode_jpeg gives."""
    from benchmarks.loaders.gpu_decode import (
        collate_encoded,
        decode_nvimgcodec,
        nvimgcodec_missing,
        nvimgcodec_params,
        read_bytes,
        split_encoded,
    )

    if nvimgcodec_missing():
        pytest.skip("nvidia.nvimgcodec is not installed (pip install 'nvidia-nvimgcodec-cu13')")
    from nvidia import nvimgcodec
    from torchvision.io import decode_jpeg

    files = sorted(folder.rglob("*.jpg"))[:6]
    batch = collate_encoded([(read_bytes(str(f)), 0) for f in files])
    encoded = split_encoded(batch.joined, batch.lengths)
    decoder = nvimgcodec.Decoder(
        device_id=nvimgcodec.NVIMGCODEC_DEVICE_CPU_ONLY, backends=[nvimgcodec.Backend(nvimgcodec.BackendKind.CPU_ONLY)]
    )
    images = decode_nvimgcodec(
        nvimgcodec, decoder, nvimgcodec_params(nvimgcodec), encoded, cuda_stream=0, consumer_stream=-1
    )
    expected = decode_jpeg(encoded)
    assert [tuple(i.shape) for i in images] == [tuple(e.shape) for e in expected]
    assert all((a.int() - b.int()).abs().max() <= 1 for a, b in zip(images, expected))


def test_keeping_the_pool_memory_never_raises():
    from benchmarks.loaders.gpu_decode import keep_pool_memory

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the call would change its memory pool")
    assert keep_pool_memory(0).startswith("unchanged (")
