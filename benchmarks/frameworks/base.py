"""The adapter protocol: the loop talks to a framework through exactly these methods."""
from __future__ import annotations

from typing import ClassVar, Protocol

import torch

from benchmarks.distenv import DistEnv
from benchmarks.errors import ConfigError


def comm_timer_enabled(knob: object, device: torch.device) -> bool:
    """framework.comm_timer: on | off | auto. auto times collectives on CPU only: on CUDA every framework's
    timer costs something (DDP's hook ~2%, Horovod's stream sync ~5% on 1 H200), and a profiler window
    (run.profile_steps) gives the breakdown there instead."""
    value = str(knob).lower()
    if value in ("on", "true"):
        return True
    if value in ("off", "false"):
        return False
    if value == "auto":
        return device.type == "cpu"
    raise ConfigError(f"framework.comm_timer={knob!r} is not allowed; choose auto, on or off")


class CommTimer(Protocol):
    """Measures a framework's collectives for one step (total and exposed seconds).

    A timer whose numbers come from CUDA events sets `reads_late = True`: the loop then asks it when it
    reads the step's own phase times (two steps late, oldest first) instead of right after the step."""

    reads_late: bool

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
