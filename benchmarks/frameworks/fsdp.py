"""PyTorch FSDP2 (torch.distributed.fsdp.fully_shard): NCCL on GPU, gloo on CPU.

Every parameter becomes a DTensor sharded on dim 0 over the ranks (a 1-D device mesh). Each fully_shard
group (framework.shard_unit) all-gathers its parameters before its forward (and, with
reshard_after_forward, again before its backward) and reduce-scatters its gradients after backward;
the optimizer steps on the local shards. The hooks run inside forward and backward: backward() and
step() are plain calls here.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
from torch.distributed.tensor import DTensor

from benchmarks.adapter_config import Installation
from benchmarks.frameworks.base import CommTimer
from benchmarks.frameworks.configs import FSDPConfig, ShardUnit
from benchmarks.frameworks.torch_collectives import ScaledStep, TorchCollectives
from benchmarks.optim import constructor_settings


def mixed_precision_policy(config: FSDPConfig, amp_dtype: torch.dtype | None) -> MixedPrecisionPolicy:
    """precision=amp_* with mixed_precision=policy: parameters all-gathered and computed in the amp dtype,
    gradients reduced in fp32 (reduce_dtype=fp32, as DDP) or in the amp dtype (param); else full precision."""
    amp = amp_dtype is not None
    if not config.gathers_half(amp=amp):
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(
        param_dtype=amp_dtype, reduce_dtype=amp_dtype if config.reduces_half(amp=amp) else torch.float32
    )


def _holds_parameters(module: torch.nn.Module) -> bool:
    return any(True for _ in module.parameters())


def repeated_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The blocks of the model's repeated stacks, inner ones first: the members of every ModuleList or
    Sequential whose members with parameters are at least two and all of one class."""
    blocks = []
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList | torch.nn.Sequential):
            members = [m for m in module.children() if _holds_parameters(m)]
            if len(members) >= 2 and len({type(m) for m in members}) == 1:
                blocks += members
    return blocks[::-1]  # modules() lists outer before inner; fully_shard wants inner first


def shard_groups(model: torch.nn.Module, unit: ShardUnit) -> list[torch.nn.Module]:
    """The modules fully_shard is applied to, inner ones first and the model last (it takes the rest)."""
    if unit is ShardUnit.children:
        inner = [m for m in model.children() if _holds_parameters(m)]
    elif unit is ShardUnit.blocks:
        inner = repeated_blocks(model)
    else:
        inner = []
    return [*inner, model]


def batch_norms(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The BatchNorm layers that train (affine weights): kept in fp32 under a bf16/fp16 parameter policy."""
    return [
        m
        for m in model.modules()
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and any(p.requires_grad for p in m.parameters(False))
    ]


class FSDP(ScaledStep, TorchCollectives):
    name: ClassVar[str] = "fsdp"

    def __init__(self, config: FSDPConfig) -> None:
        config.check()
        self.config = config
        self.backend = config.backend  # "auto" until init() knows the device
        self.rank = self.local_rank = 0
        self.world_size = 1
        self._optimizer: torch.optim.Optimizer | None = None
        self._scaler: ShardedGradScaler | None = None
        self._policy = MixedPrecisionPolicy()
        self._num_groups = 0

    @classmethod
    def installation(cls) -> Installation:
        ok = dist.is_available()
        return Installation(
            ok=ok,
            detail=f"torch.distributed.fsdp.fully_shard (torch {torch.__version__})",
            fix="" if ok else "install a torch build with distributed support (pip install torch)",
        )

    def setup(self, model, optimizer, *, amp_dtype):
        mesh = init_device_mesh(self.device.type, (self.world_size,))
        self._policy = mixed_precision_policy(self.config, amp_dtype)
        # FSDP2 shards contiguous parameters only: channels_last weights go back to NCHW (inputs stay as they are)
        for parameter in model.parameters():
            parameter.data = parameter.data.contiguous()
        groups = shard_groups(model, self.config.shard_unit)
        norms = batch_norms(model) if self._policy.param_dtype is not None else []
        groups = [g for g in groups if not any(g is n for n in norms)]  # a norm that is a child is in its group
        if norms:
            # BatchNorm keeps fp32 weights beside its fp32 running statistics (cast to bf16 they meet fp32
            # statistics, which batch_norm refuses on CPU and, for RetinaNet, on CUDA): one group of all of
            # them, one all-gather, full precision; their bf16 inputs stay bf16
            fully_shard(
                norms,
                mesh=mesh,
                reshard_after_forward=self.config.reshard_after_forward,
                mp_policy=MixedPrecisionPolicy(reduce_dtype=self._policy.reduce_dtype),
            )
        for module in groups:
            fully_shard(
                module, mesh=mesh, reshard_after_forward=self.config.reshard_after_forward, mp_policy=self._policy
            )
        self._num_groups = len(groups) + bool(norms)
        # fully_shard replaced the parameters by sharded DTensors: the optimizer is rebuilt over them,
        # same class and settings (one param group, as components.build_model_and_optimizer makes)
        assert len(optimizer.param_groups) == 1, "one param group"
        self._optimizer = type(optimizer)(model.parameters(), **constructor_settings(optimizer))
        # float16 needs loss scaling; the sharded scaler agrees on inf/NaN over all ranks' gradient shards
        self._scaler = ShardedGradScaler(self.device.type) if amp_dtype == torch.float16 else None
        return model, self._optimizer

    def backward(self, loss: torch.Tensor) -> None:
        # the groups' reduce-scatters run in backward hooks; the last one is waited for before it returns
        self.scaled_backward(loss)

    def host_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        # every rank calls this (run.save_params): full_tensor() all-gathers each sharded parameter
        return {
            k: (v.full_tensor() if isinstance(v, DTensor) else v).detach().cpu() for k, v in model.state_dict().items()
        }

    def release(self) -> None:
        self._optimizer = None
        self._scaler = None

    def comm_timer(self) -> CommTimer | None:
        return None  # all-gathers and reduce-scatters run on FSDP's own streams inside forward/backward, untimed

    def describe(self) -> dict:
        dtype = lambda d: None if d is None else str(d).removeprefix("torch.")  # noqa: E731
        return {
            "framework": self.name,
            "backend": self.backend,
            "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None,
            "reshard_after_forward": self.config.reshard_after_forward,
            "shard_unit": self.config.shard_unit.value,
            "num_shard_groups": self._num_groups,
            "param_dtype": dtype(self._policy.param_dtype),  # None: the parameters' own (fp32)
            "reduce_dtype": dtype(self._policy.reduce_dtype),
            "weights_format": "contiguous (FSDP2 shards contiguous parameters only)",
        }
