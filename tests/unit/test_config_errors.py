"""Bad input: one line naming the key, the value and the fix; nothing launched."""

import pytest

from benchmarks.errors import ConfigError
from benchmarks.validate import validate


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["framework=foo"], "framework=foo is not an option; choose one of: "),
        (["loader=bar"], "loader=bar is not an option; choose one of: "),
        (
            ["run.stepz=3"],
            "run.stepz is not a config key; did you mean run.steps? 'ddlbench run --cfg job' prints every key",
        ),
        (["mdoel.depth=18"], "mdoel is not a config key; did you mean model.depth?"),
        (["framework=horovod", "framework.controlr=gloo"], "did you mean framework.controller?"),
        (["run.stpes=3", "mdoel.depth=18"], "run.stpes is not a config key; did you mean run.steps?"),
        (["run.xyzzy=3"], "run.xyzzy is not a config key; 'ddlbench run --cfg job' prints every key"),
        (["run.steps=abc"], "run.steps=abc must be of type Integer"),
        (["framework.bucket_cap_mbb=3"], "framework.bucket_cap_mbb is not a config key"),
        (["run.campaign=x;rm -rf /"], "characters that are not allowed"),
        (["run.campaign=$(id)"], "characters that are not allowed"),
        (["+foo=1"], "adding or deleting keys is not supported"),
        (["+run.foo=1"], "The one exception sets an environment variable for every rank: +system.env.NAME=value"),
        (["+system.env.lower=1"], "'lower' is no environment variable name for the ranks; use capitals, digits and _"),
        (
            ["system.env.NCCL_MAX_CTAS=8"],
            "system.env.NCCL_MAX_CTAS is not set by this system profile; add it with a "
            "leading '+': +system.env.NCCL_MAX_CTAS=value",
        ),
        (["+system.env.NCCL_DEBUG_X=true"], "system.env.NCCL_DEBUG_X=true would reach the ranks as 'True'"),
        (["+system.env.X=$(id)"], "override '+system.env.X=$(id)': system.env.X has characters that are not allowed"),
        (
            ["system=h200", "+system.env.OMP_NUM_THREADS=4"],
            "system.env.OMP_NUM_THREADS already exists; set it without the leading '+': system.env.OMP_NUM_THREADS=value",
        ),
        (["framework"], "is not key=value"),
        (["run.campaign=ab\n"], "characters that are not allowed"),
    ],
)
def test_composition_errors(compose, overrides, expected):
    with pytest.raises(ConfigError) as error:
        compose(overrides)
    message = str(error.value)
    assert expected in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["loader=native"], "data.path is not set; make a dataset with 'ddlbench data synth"),
        (["loader=native", "data.path=/no/such/dir"], "data.path='/no/such/dir' is not a directory"),
        (
            ["loader=native", f"data.path={__file__}"],
            "is a file, not a folder; pass the dataset's folder (an ImageFolder: <class>/<image>.jpg), or make "
            "one with 'ddlbench data synth --out data/synth' and pass data.path=data/synth",
        ),
        (["run.per_gpu_batch=0"], "run.per_gpu_batch=0 must be >= 1"),
        (["run.epochs=0"], "run.epochs=0 must be >= 1"),
        (["run.hang_timeout_s=-3"], "run.hang_timeout_s=-3.0 is not allowed; pass seconds > 0, 0 (no hang watchdog)"),
        (["system.ranks_per_node=0"], "system.ranks_per_node=0 must be >= 1"),
        (["precision.amp_dtype=float8"], "precision.amp_dtype=float8 is not allowed; choose bfloat16 or float16"),
        (["run.campaign=.hidden"], "run.campaign='.hidden' must be letters"),
        (["framework.comm_timer=sometimes"], "framework.comm_timer=sometimes is not allowed; choose auto, on or off"),
        (["framework=horovod", "framework.comm_timer=x"], "framework.comm_timer=x is not allowed"),
        (
            ["framework=horovod", "framework.controller=ucx"],
            "framework.controller=ucx is not allowed; choose auto, gloo or mpi",
        ),
        (["framework=horovod", "framework.cycle_time_ms=0"], "framework.cycle_time_ms=0.0 must be > 0"),
        (
            ["framework=deepspeed", "framework.reduce_dtype=bf16"],
            "framework.reduce_dtype=bf16 is not allowed; choose fp32 or autocast",
        ),
        (
            ["framework=deepspeed", "framework.zero_stage=4"],
            "framework.zero_stage=4 is not allowed; choose 0, 1, 2 or 3",
        ),
        (["loader=dali", "loader.reader=lmdb"], "loader.reader=lmdb is not allowed; choose file or tfrecord"),
        (["loader=dali", "loader.hw_decoder_load=1.5"], "loader.hw_decoder_load=1.5 must be between 0 and 1"),
        (["loader=native", "data.path=/tmp", "loader.num_workers=-1"], "loader.num_workers=-1 must be >= 0"),
        (
            ["loader=native_gpu", "data.path=/tmp", "loader.cpu_decode_share=1.5"],
            "loader.cpu_decode_share=1.5 must be between 0 and 1",
        ),
        (["model=resnet", "model.depth=42"], "model.depth=42 is not a ResNet depth"),
        (
            ["model.arch=alexnet"],
            "model.arch=alexnet is not allowed; choose resnet, vgg, mobilenet_v2, shufflenet_v2, simple_cnn, bert or retinanet",
        ),
        (["data.cache=tepid"], "data.cache=tepid is not allowed; choose warm or cold (e.g. data.cache=warm)"),
    ],
)
def test_validation_errors(compose, overrides, expected):
    with pytest.raises(ConfigError) as error:
        validate(compose(overrides), check_device=False)
    assert expected in str(error.value)
    assert "\n" not in str(error.value)


def test_cuda_system_without_gpu(compose):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the no-GPU error cannot happen here")
    with pytest.raises(
        ConfigError, match="system=h200 wants CUDA GPUs but this machine has none; use system=local_cpu"
    ):
        validate(compose(["system=h200"]))


def test_unknown_model_depth():
    from benchmarks.models import build_model

    with pytest.raises(
        ConfigError, match=r"model.depth=42 is not a ResNet depth; choose one of \[18, 34, 50, 101, 152\]"
    ):
        build_model(arch="resnet", depth=42, num_classes=10, seed=0)


@pytest.mark.parametrize(
    ("knob", "device", "enabled"),
    [
        ("auto", "cpu", True),
        ("auto", "cuda", False),
        ("on", "cuda", True),
        ("off", "cpu", False),
        ("on", "cpu", True),
    ],
)
def test_comm_timer_knob(compose, knob, device, enabled):
    from benchmarks.adapter_config import adapter_config

    for framework in ("ddp", "horovod", "deepspeed"):  # one closed set, one rule, for every framework
        config = adapter_config(compose([f"framework={framework}", f"framework.comm_timer={knob}"]).framework)
        assert config.comm_timer.enabled(device) is enabled


def test_a_new_environment_variable_for_every_rank(compose):
    cfg = compose(["system=h200", "+system.env.NCCL_MAX_CTAS=8"])
    assert cfg.system.env["NCCL_MAX_CTAS"] == "8"
    assert cfg.system.env["NCCL_NVLS_ENABLE"] == "0"
