"""The adapter protocol: the loop talks to a framework through exactly these methods."""
from __future__ import annotations

from typing import ClassVar, Protocol

import torch

from benchmarks.distenv import DistEnv


class CommTimer(Protocol):
    """Measures a framework's collectives for one step (total and exposed seconds)."""

    def step_comm_s(self) -> tuple[float | None, float | None]:
        """(total collective seconds, exposed seconds) of the last step; None where not measured."""
        ...


class Framework(Protocol):
    name: ClassVar[str]
    rank: int
    local_rank: int
    world_size: int

    def init(self, env: DistEnv, device: torch.device) -> None:
        """Create the process group (init_process_group / hvd.init / deepspeed.init_distributed)."""
        ...

    def setup(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, *, amp_dtype: torch.dtype | None
    ) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
        """Wrap model and optimizer jointly (DeepSpeed needs both); returns what the loop uses.
        amp_dtype is the autocast dtype the loop uses (float16 needs loss scaling here)."""
        ...

    def backward(self, loss: torch.Tensor) -> None: ...

    def step(self) -> None:
        """Apply the update and clear the gradients for the next step."""
        ...

    def comm_timer(self) -> CommTimer | None: ...

    def barrier(self) -> None: ...

    def all_reduce_scalar(self, x: float, op: str) -> float:
        """Reduce one float over all ranks; op is 'sum', 'max' or 'min'."""
        ...

    def host_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """Every parameter and buffer, whole and on the host (run.save_params); sharded frameworks gather."""
        ...

    def shutdown(self) -> None:
        """Close the process group (always, also after a failure: avoids aborts at exit)."""
        ...

    def describe(self) -> dict:
        """Facts for meta.json: backend, versions, knobs that change what is measured."""
        ...
