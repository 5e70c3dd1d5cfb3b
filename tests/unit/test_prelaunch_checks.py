"""What the submit host checks before any rank starts: the model's options per architecture and the data
set (present, the loader's files, enough for one step of every rank, readable)."""

from __future__ import annotations

import pytest

from benchmarks.errors import ConfigError
from benchmarks.validate import check_data, validate


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from benchmarks.data.synth import synth_imagefolder

    out = tmp_path_factory.mktemp("pre") / "data"
    synth_imagefolder(out, num_classes=2, images_per_class=4, width=32, height=24, quality=90, seed=0, progress=False)
    return out


@pytest.mark.parametrize(
    "overrides, words",
    [
        (["model=vgg16", "model.image_size=16"], "model.image_size=16 must be >= 32 for model.arch=vgg"),
        (["model=resnet", "model.depth=51"], "model.depth=51 is not a ResNet depth"),
    ],
)
def test_model_options_per_architecture(compose, overrides, words):
    with pytest.raises(ConfigError, match=words):
        validate(compose(overrides), check_device=False)


def test_a_data_set_large_enough_for_one_step_passes(compose, folder):
    check_data(compose(["loader=native", f"data.path={folder}", "run.per_gpu_batch=4"]), world_size=2)
    check_data(compose(["loader=synthetic", "run.per_gpu_batch=4096"]), world_size=64)  # reads nothing


def test_too_small_empty_and_wrong_kind_are_one_line(compose, folder, tmp_path):
    with pytest.raises(
        ConfigError, match=r"holds 8 samples, but one step of 4 rank\(s\) at run.per_gpu_batch=4 needs 16"
    ):
        check_data(compose(["loader=native", f"data.path={folder}", "run.per_gpu_batch=4"]), world_size=4)
    (tmp_path / "empty" / "a").mkdir(parents=True)
    with pytest.raises(ConfigError, match="holds no images"):
        check_data(compose(["loader=native", f"data.path={tmp_path / 'empty'}"]), world_size=1)
    with pytest.raises(ConfigError, match="holds no TFRecord samples"):
        check_data(compose(["loader=dali", "loader.reader=tfrecord", f"data.path={folder}"]), world_size=1)
    (tmp_path / "png" / "a").mkdir(parents=True)
    (tmp_path / "png" / "a" / "x.png").write_bytes(b"\x89PNG")
    with pytest.raises(ConfigError, match=r"holds no images \(.jpg, .jpeg\) in class folders for loader=native_gpu"):
        check_data(compose(["loader=native_gpu", f"data.path={tmp_path / 'png'}"]), world_size=1)


def test_an_unreadable_file_is_named(compose, folder, monkeypatch):
    import builtins

    real_open = builtins.open

    def no_permission(path, *args, **kwargs):
        if str(path).endswith(".jpg"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_permission)
    with pytest.raises(ConfigError, match="cannot be read \\(Permission denied\\); fix the permissions"):
        check_data(compose(["loader=native", f"data.path={folder}", "run.per_gpu_batch=1"]), world_size=1)


def test_a_campaign_submit_names_the_sizes_the_data_set_cannot_feed(no_slurm, folder, tmp_path, monkeypatch, capsys):
    """A user's own experiment (DDLBENCH_CONFIG) over 1 and 2 ranks at batch 6 on 8 images: 2 ranks
    need 12, so that cell is impossible, with the data set's reason."""
    from ddlbench.cli import main

    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "tiny.yaml").write_text(
        "# @package _global_\nmodel:\n  arch: simple_cnn\nrun:\n  campaign: tiny\n  per_gpu_batch: 6\n"
        "campaign:\n  gpus: [1, 2]\n  repeats: 1\n  axes:\n    loader: [native]\n"
    )
    monkeypatch.setenv("DDLBENCH_CONFIG", str(tmp_path))
    from launchers.campaign import plan

    overrides = ["experiment=tiny", "system=slurm_cpu", f"data.path={folder}"]
    _, cells = plan(overrides)  # as `campaign plan`, `status`, `run` and `submit` plan (issue 49: one answer)
    assert [c.problem is None for c in cells] == [True, False] and "holds 8 samples" in cells[1].problem
    code = main(["campaign", "submit", *overrides, "--dry-run"])
    out = capsys.readouterr()
    assert code == 0 and out.out.count("sbatch") == 1, out
