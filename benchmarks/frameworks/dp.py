"""torch.nn.DataParallel: one process, one model replica per GPU, rebuilt from GPU 0 every step.

Each forward scatters the batch over the GPUs, replicates the module onto them, runs the replicas in
threads and gathers the outputs on GPU 0; backward sums the replicas' gradients into GPU 0's
parameters, where the one optimizer steps. There is no process group: the process is the whole run
(FrameworkConfig.SINGLE_PROCESS: `ddlbench run` starts one process, whatever system.ranks_per_node).
On a CPU there is one device, so DataParallel calls the module as it is.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch.nn import DataParallel

from benchmarks.adapter_config import Installation
from benchmarks.distenv import DistEnv
from benchmarks.errors import ConfigError
from benchmarks.frameworks.base import CommTimer
from benchmarks.frameworks.configs import DPConfig
from benchmarks.frameworks.torch_collectives import ScaledStep, TorchCollectives


class DP(ScaledStep, TorchCollectives):
    name: ClassVar[str] = "dp"

    def __init__(self, config: DPConfig) -> None:
        config.check()
        self.config = config
        self.rank = self.local_rank = 0
        self.world_size = 1  # processes: the loop's progress line counts samples per process
        self.device_ids: list[int] = []
        self._optimizer: torch.optim.Optimizer | None = None
        self._scaler: torch.amp.GradScaler | None = None

    @classmethod
    def installation(cls) -> Installation:
        return Installation(ok=True, detail=f"torch.nn.DataParallel (torch {torch.__version__})")

    def init(self, env: DistEnv, device: torch.device) -> None:
        if env.world_size != 1:
            raise ConfigError(
                f"framework=dp runs one process but the launcher started {env.world_size}; start it "
                "with 'ddlbench run framework=dp' (it drives system.ranks_per_node GPUs itself)"
            )
        if device.type == "cpu" and torch.cuda.is_available():
            # DataParallel would move the work onto this machine's GPUs
            raise ConfigError(
                "framework=dp with system.device=cpu on a machine with GPUs: DataParallel would use "
                "the GPUs; pass a GPU system (e.g. system=h200) or hide them (CUDA_VISIBLE_DEVICES=)"
            )
        self.device = device
        if device.type == "cuda":
            self.device_ids = list(range(device.index, device.index + env.devices_per_rank))

    def setup(self, model, optimizer, *, amp_dtype):
        # float16 gradients underflow without dynamic loss scaling; bfloat16 needs none
        self._scaler = torch.amp.GradScaler(self.device.type) if amp_dtype == torch.float16 else None
        self._optimizer = optimizer
        # the loop's torch.autocast covers the replicas: DataParallel runs them under the caller's autocast state
        return DataParallel(model, device_ids=self.device_ids or None), optimizer

    def backward(self, loss: torch.Tensor) -> None:
        self.scaled_backward(loss)

    def release(self) -> None:
        self._optimizer = None
        self._scaler = None

    def comm_timer(self) -> CommTimer | None:
        return None  # scatter, broadcast and gather run inside forward and backward, untimed

    def describe(self) -> dict:
        return {
            "framework": self.name,
            "torch": torch.__version__,
            "processes": 1,
            "device_ids": self.device_ids,  # [] on a CPU: the module is called as it is
        }
