"""PyTorch DistributedDataParallel: NCCL on GPU, gloo on CPU."""
from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from benchmarks.distenv import DistEnv
from benchmarks.frameworks.base import CommTimer
from benchmarks.frameworks.torch_collectives import TorchCollectives


class DDP(TorchCollectives):
    name: ClassVar[str] = "ddp"

    def __init__(
        self,
        *,
        backend: str = "auto",
        bucket_cap_mb: float = 25.0,
        gradient_as_bucket_view: bool = True,
        static_graph: bool = False,
        find_unused_parameters: bool = False,
        wrap_single_rank: bool = False,
        **_launch: object,  # name, local_launcher: read by the launcher, not here
    ) -> None:
        self.backend = backend
        self.bucket_cap_mb = bucket_cap_mb
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.find_unused_parameters = find_unused_parameters
        self.wrap_single_rank = wrap_single_rank
        self.wrapped = False
        self.rank = self.local_rank = 0
        self.world_size = 1
        self._optimizer: torch.optim.Optimizer | None = None
        self._scaler: torch.amp.GradScaler | None = None

    def init(self, env: DistEnv, device: torch.device) -> None:
        if self.backend == "auto":
            self.backend = "nccl" if device.type == "cuda" else "gloo"
        self.rank, self.local_rank, self.world_size = env.rank, env.local_rank, env.world_size
        self.device = device
        dist.init_process_group(
            backend=self.backend,
            init_method=f"tcp://{env.master_addr}:{env.master_port}",
            rank=env.rank,
            world_size=env.world_size,
            timeout=timedelta(minutes=10),
            **({"device_id": device} if device.type == "cuda" else {}),
        )

    def setup(self, model, optimizer, *, amp_dtype):
        # float16 gradients underflow without dynamic loss scaling; bfloat16 needs none
        self._scaler = torch.amp.GradScaler(self.device.type) if amp_dtype == torch.float16 else None
        self._optimizer = optimizer
        if self.world_size == 1 and not self.wrap_single_rank:
            # one rank has nothing to all-reduce: the wrapper would only add bucket copies
            return model, optimizer
        self.wrapped = True
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        wrapped = DistributedDataParallel(
            model,
            device_ids=device_ids,
            bucket_cap_mb=self.bucket_cap_mb,
            gradient_as_bucket_view=self.gradient_as_bucket_view,
            static_graph=self.static_graph,
            find_unused_parameters=self.find_unused_parameters,
        )
        return wrapped, optimizer

    def backward(self, loss: torch.Tensor) -> None:
        # DDP's hooks all-reduce gradient buckets during backward; the last bucket is waited for here
        (self._scaler.scale(loss) if self._scaler else loss).backward()

    def step(self) -> None:
        assert self._optimizer is not None, "setup() before step()"
        if self._scaler:
            self._scaler.step(self._optimizer)
            self._scaler.update()
        else:
            self._optimizer.step()
        self._optimizer.zero_grad(set_to_none=True)

    def comm_timer(self) -> CommTimer | None:
        return None  # comm hook timing: see the breakdown issue

    def describe(self) -> dict:
        return {
            "framework": self.name,
            "backend": self.backend,
            "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None,
            "bucket_cap_mb": self.bucket_cap_mb,
            "gradient_as_bucket_view": self.gradient_as_bucket_view,
            "static_graph": self.static_graph,
            "ddp_wrapped": self.wrapped,  # False at world size 1 unless wrap_single_rank
        }
