"""benchmarks/models: every family and ablation builds for any class count and image size, trains on a CPU,
has torchvision's (and BERT's published) parameters where they are built, is checked before launch and names
its cells."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from benchmarks.errors import ConfigError
from benchmarks.models import build_model
from benchmarks.rundir import cell_identity
from benchmarks.validate import validate

# torchvision's published parameter counts at 1000 classes (the weights tables of torchvision.models)
TORCHVISION_PARAMS = {
    ("vgg", 11, False): 132_863_336,
    ("vgg", 11, True): 132_868_840,
    ("vgg", 13, False): 133_047_848,
    ("vgg", 13, True): 133_053_736,
    ("vgg", 16, False): 138_357_544,
    ("vgg", 16, True): 138_365_992,
    ("vgg", 19, False): 143_667_240,
    ("vgg", 19, True): 143_678_248,
    ("shufflenet_v2", 0.5, None): 1_366_792,
    ("shufflenet_v2", 1.0, None): 2_278_604,
    ("shufflenet_v2", 1.5, None): 3_503_624,
    ("shufflenet_v2", 2.0, None): 7_393_996,
    ("resnet", 18, True): 11_689_512,
    ("resnet", 34, True): 21_797_672,
    ("resnet", 50, True): 25_557_032,
    ("resnet", 101, True): 44_549_160,
    ("resnet", 152, True): 60_192_808,
}


def _numel(modules) -> int:
    return sum(p.numel() for m in modules for p in m.parameters(recurse=False))


def _on_meta(**kw) -> nn.Module:
    """The model without memory or init work: parameter shapes only."""
    with torch.device("meta"):
        return build_model(num_classes=1000, seed=0, **kw)


def _forward_backward(model: nn.Module, *, num_classes: int, image_size: int) -> None:
    x = torch.randn(2, 3, image_size, image_size)
    out = model(x)
    assert out.shape == (2, num_classes)
    nn.functional.cross_entropy(out, torch.randint(num_classes, (2,))).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize(
    "kw",
    [
        *({"arch": "shufflenet_v2", "depth": None, "width": width} for width in (0.5, 1.0, 1.5, 2.0)),
        # heavy: VGG-11's 133M parameters take 3-7 s each to initialise on the CI machine; the fast tier builds
        # every VGG on the meta device (test_torchvision_parameter_counts) and trains none
        pytest.param({"arch": "vgg", "depth": 11, "batch_norm": False}, marks=pytest.mark.heavy),
        pytest.param({"arch": "vgg", "depth": 11, "batch_norm": True}, marks=pytest.mark.heavy),
        *(
            {"arch": "resnet", "depth": depth, "batch_norm": bn, "residual": residual}
            for depth in (18, 50)
            for bn, residual in ((False, True), (True, False), (False, False))
        ),
    ],
    ids=str,
)
def test_forward_and_backward_on_a_cpu(kw):
    _forward_backward(build_model(num_classes=7, seed=0, **kw), num_classes=7, image_size=32)


@pytest.mark.parametrize(
    "kw",
    [
        {"arch": "shufflenet_v2", "depth": None, "width": 0.5},
        {"arch": "resnet", "depth": 18, "batch_norm": False},
        {"arch": "resnet", "depth": 50, "residual": False},
    ],
    ids=str,
)
def test_the_smallest_image_and_one_class(kw):
    """Any image_size and num_classes the non-VGG families accept (VGG needs 32 px: checked before launch)."""
    _forward_backward(build_model(num_classes=1, seed=0, **kw), num_classes=1, image_size=1)


@pytest.mark.parametrize(("arch", "shape", "bn"), list(TORCHVISION_PARAMS), ids=str)
def test_torchvision_parameter_counts(arch, shape, bn):
    kw = {"width": shape, "depth": None} if arch == "shufflenet_v2" else {"depth": shape, "batch_norm": bn}
    assert _numel(_on_meta(arch=arch, **kw).modules()) == TORCHVISION_PARAMS[(arch, shape, bn)]


@pytest.mark.parametrize("depth", [18, 34, 50, 101, 152])
def test_resnet_ablations_drop_exactly_the_norms_and_the_skips(depth):
    full = _on_meta(arch="resnet", depth=depth)
    norms = _numel(m for m in full.modules() if isinstance(m, nn.BatchNorm2d))
    projections = _numel(m for name, m in full.named_modules() if ".downsample." in name)
    projection_norms = _numel(
        m for name, m in full.named_modules() if ".downsample." in name and isinstance(m, nn.BatchNorm2d)
    )
    total = TORCHVISION_PARAMS[("resnet", depth, True)]
    nobn = _on_meta(arch="resnet", depth=depth, batch_norm=False)
    noskip = _on_meta(arch="resnet", depth=depth, residual=False)
    both = _on_meta(arch="resnet", depth=depth, batch_norm=False, residual=False)
    assert _numel(nobn.modules()) == total - norms
    assert _numel(noskip.modules()) == total - projections
    assert _numel(both.modules()) == total - norms - projections + projection_norms
    assert not any(isinstance(m, nn.BatchNorm2d) for m in (*nobn.modules(), *both.modules()))
    assert all(block.downsample is None for stage in ("layer1", "layer4") for block in getattr(noskip, stage))


def test_resnet_without_batch_norm_starts_as_identity_blocks_and_trains():
    """The last conv of each residual branch starts at zero (Fixup/SkipInit); the plain net zeroes nothing."""
    model = build_model(arch="resnet", depth=18, num_classes=10, seed=0, batch_norm=False)
    assert all(not block.conv2.weight.any() for stage in ("layer1", "layer4") for block in getattr(model, stage))
    plain = build_model(arch="resnet", depth=18, num_classes=10, seed=0, batch_norm=False, residual=False)
    assert all(block.conv2.weight.any() for block in plain.layer4)
    x, y = torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(0)), torch.tensor([0, 1, 2, 3])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    losses = []
    for _ in range(10):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


def test_the_default_resnet_is_torchvisions():
    import torchvision.models as tvm

    ours = build_model(arch="resnet", depth=18, num_classes=10, seed=3).state_dict()
    torch.manual_seed(3)
    theirs = tvm.resnet18(weights=None, num_classes=10).state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)


VARIANTS = {
    "resnet50": ["model=resnet"],
    "resnet18_nobn": ["model=resnet", "model.depth=18", "model.batch_norm=false"],
    "resnet18_noskip": ["model=resnet", "model.depth=18", "model.residual=false"],
    "resnet18_nobn_noskip": ["model=resnet", "model.depth=18", "model.batch_norm=false", "model.residual=false"],
    "resnet18": ["model=resnet", "model.depth=18"],
    "vgg16": ["model=vgg"],
    "vgg16_bn": ["model=vgg", "model.batch_norm=true"],
    "vgg19": ["model=vgg", "model.depth=19"],
    "vgg19_bn": ["model=vgg", "model.depth=19", "model.batch_norm=true"],
    "shufflenet_v2_x0_5": ["model=shufflenet_v2", "model.width=0.5"],
    "shufflenet_v2_x1_0": ["model=shufflenet_v2"],
    "shufflenet_v2_x2_0": ["model=shufflenet_v2", "model.width=2.0"],
    "mobilenet_v2": ["model=mobilenet_v2"],
    "bert_base": ["model=bert"],
    "bert_large": ["model=bert", "model.size=large"],
    "bert_tiny": ["model=bert", "model.size=tiny"],
    "retinanet": ["model=retinanet"],
}


def _dir_name(compose, overrides: list[str]) -> str:
    cfg = compose(overrides)
    validate(cfg, check_device=False)
    return cell_identity.run_dir(OmegaConf.to_container(cfg, resolve=True), world_size=1, num_nodes=1).name


def test_every_variant_has_its_own_readable_name(compose):
    names = {model: _dir_name(compose, overrides) for model, overrides in VARIANTS.items()}
    for model, name in names.items():
        assert name.startswith(f"ddp-synthetic-{model}-fp32-g1-n1-b32-"), name
    assert len(set(names.values())) == len(names)
    assert _dir_name(compose, ["model=vgg16"]) == names["vgg16"]  # the alias is the same cell


def test_records_without_the_new_keys_keep_their_names():
    assert cell_identity.model_name("resnet", 50) == "resnet50"
    assert cell_identity.model_name("vgg", 16) == "vgg16"
    assert cell_identity.model_name_of({"arch": "simple_cnn", "depth": 50, "batch_norm": True}) == "simple_cnn"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["model=shufflenet_v2", "model.width=0.75"],
            r"model.width=0.75 is not a ShuffleNetV2 width; choose one of \[0.5, 1.0, 1.5, 2.0\] "
            r"\(e.g. model.width=1.0\)",
        ),
        (["model.arch=shufflenet_v2"], "model.width=None is not a ShuffleNetV2 width"),
        (["model=vgg", "model.depth=18"], r"model.depth=18 is not a VGG depth; choose one of \[11, 13, 16, 19\]"),
        (["model=vgg", "model.batch_norm=true", "model.image_size=31"], "model.image_size=31 must be >= 32"),
        (
            ["model=mobilenet_v2", "model.batch_norm=false"],
            "model.batch_norm=false is not built for model.arch=mobilenet_v2; drop it, or choose model=resnet "
            "or model=vgg for the ablation",
        ),
        (
            ["model=shufflenet_v2", "model.residual=false"],
            "model.residual=false is not built for model.arch=shufflenet_v2; drop it, or choose model=resnet",
        ),
        (["model=resnet", "model.batch_norm=maybe"], "model.batch_norm"),
        (["model=bert", "model.size=huge"], r"model.size=huge is not allowed; choose tiny, base or large"),
        (["model.arch=bert"], r"model.size=None is not a BERT size; choose tiny, base or large"),
        (["model=bert", "model.seq_len=513"], r"model.seq_len=513 must be between 2 and 512"),
        (["model=retinanet", "model.image_size=16"], "model.image_size=16 must be >= 32 for model.arch=retinanet"),
    ],
)
def test_model_errors_before_launch(compose, overrides, expected):
    with pytest.raises(ConfigError, match=expected) as error:
        validate(compose(overrides), check_device=False)
    assert "\n" not in str(error.value)


# BERT's published sizes (Devlin et al. 2019: bert-base-uncased, bert-large-uncased) count the pooler, which
# the span head does not use (transformers builds none for it); the head is Linear(hidden, 2)
BERT_PARAMS = {"base": (109_482_240, 768), "large": (335_141_888, 1024)}


@pytest.mark.parametrize("size", sorted(BERT_PARAMS))
def test_bert_has_the_published_parameters_without_the_pooler_plus_the_span_head(size, transformers):
    published, hidden = BERT_PARAMS[size]
    model = _on_meta(arch="bert", depth=None, size=size)
    pooler = hidden * hidden + hidden
    assert _numel(model.bert.modules()) == published - pooler
    assert _numel(model.modules()) == published - pooler + 2 * hidden + 2
    assert model.bert.pooler is None and model.config.num_hidden_layers == {"base": 12, "large": 24}[size]


def test_retinanet_is_torchvisions_with_a_trainable_backbone():
    """torchvision's published count (34,014,999, COCO's 91 classes) has the backbone's BatchNorm frozen
    (buffers); without pretrained weights every BatchNorm trains, adding its weight and bias."""
    with torch.device("meta"):
        model = build_model(arch="retinanet", depth=None, num_classes=91, seed=0)
    norms = _numel(m for m in model.modules() if isinstance(m, nn.BatchNorm2d))
    assert norms > 0 and _numel(model.modules()) - norms == 34_014_999
    assert model.transform.min_size == (224,) and model.transform.max_size == 224  # model.image_size, unresized


def test_bert_tiny_trains_on_a_cpu(transformers):
    from benchmarks.loaders.base import LoaderContext
    from benchmarks.models.configs import ModelConfig
    from benchmarks.tasks import build_task

    model = build_model(arch="bert", depth=None, num_classes=1000, seed=0, size="tiny")
    task = build_task(ModelConfig(arch="bert", size="tiny", seq_len=16))
    ctx = LoaderContext(
        rank=0, world_size=1, device=torch.device("cpu"), per_gpu_batch=2, seed=0, num_classes=1000,
        image_size=224, channels_last=False, data_path=None, task=task,
    )  # fmt: skip
    batch = task.synthetic_batch(range(2), ctx)
    loss = task.loss(model, batch)
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    # the loss transformers' own head computes from the same positions (without dropout, to compare)
    model.eval()
    torch.testing.assert_close(task.loss(model, batch), model(**batch).loss)


def test_retinanet_trains_on_a_cpu():
    from benchmarks.loaders.base import LoaderContext
    from benchmarks.models.configs import ModelConfig
    from benchmarks.tasks import build_task

    model = build_model(arch="retinanet", depth=None, num_classes=5, seed=0, image_size=32)
    task = build_task(ModelConfig(arch="retinanet", num_classes=5, image_size=32))
    ctx = LoaderContext(
        rank=0, world_size=1, device=torch.device("cpu"), per_gpu_batch=2, seed=0, num_classes=5,
        image_size=32, channels_last=False, data_path=None, task=task,
    )  # fmt: skip
    model.train()
    loss = task.loss(model, task.synthetic_batch(range(2), ctx))
    loss.backward()
    assert torch.isfinite(loss) and loss > 0
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_retinanet_has_torchvisions_weights_and_leaves_the_seed_alone():
    """benchmarks/models/retinanet.py swaps in its own P6/P7 block: the weights for one seed stay torchvision's,
    and the run's random stream after the build is what it was."""
    from torchvision.models.detection import retinanet_resnet50_fpn

    ours = build_model(arch="retinanet", depth=None, num_classes=5, seed=0, image_size=32).state_dict()
    after_ours = torch.rand(3)
    torch.manual_seed(0)
    theirs = retinanet_resnet50_fpn(weights=None, weights_backbone=None, num_classes=5).state_dict()
    assert torch.equal(after_ours, torch.rand(3))
    assert list(ours) == list(theirs) and all(torch.equal(ours[k], theirs[k]) for k in ours)


@pytest.mark.parametrize("how", ["autocast", "bf16 parameters"])
def test_retinanet_p6_p7_weight_gradients_are_right_under_bf16_on_a_cpu(how):
    """torch's CPU bfloat16 convolution (oneDNN's AVX-512 and AMX kernels) gives a 3x3 stride-2 convolution over
    a 1x1 map a wrong weight gradient from its second call on (1e29-1e38 where it should be ~1): RetinaNet's P7
    at <= 64 px, which made amp_bf16 runs NaN on those CPUs (issue 48). The block computes in float32 there:
    three calls in a row give the float64 gradient, under autocast and with FSDP2-style bf16 parameters."""
    from benchmarks.models.retinanet import P6P7Fp32OnCpu

    torch.manual_seed(0)
    block = P6P7Fp32OnCpu(16, 16)
    if how == "bf16 parameters":
        block = block.to(torch.bfloat16)
    for _ in range(3):
        x = torch.relu(torch.randn(2, 16, 1, 1)).to(torch.bfloat16).requires_grad_(True)
        block.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=how == "autocast"):
            p, names = block([x], [x], ["p5"])
        assert names == ["p5", "p6", "p7"] and p[1].dtype == p[2].dtype == torch.bfloat16
        (p[1].float().sum() + p[2].float().square().sum()).backward()
        # the same block in float64 on the same input and weights
        ref = P6P7Fp32OnCpu(16, 16).double()
        ref.load_state_dict({k: v.double() for k, v in block.state_dict().items()})
        q, _ = ref([x.detach().double()], [x.detach().double()], ["p5"])
        (q[1].sum() + q[2].square().sum()).backward()
        for conv, want in ((block.p6, ref.p6), (block.p7, ref.p7)):
            got = conv.weight.grad.double()
            assert torch.isfinite(got).all()
            # rounding only: the outputs are bf16, as the plain block's (and bf16 parameters' gradients too)
            torch.testing.assert_close(got, want.weight.grad, rtol=2e-2, atol=2e-2 * want.weight.grad.abs().max())
