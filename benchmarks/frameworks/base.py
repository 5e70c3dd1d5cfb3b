"""The adapter protocol: the loop talks to a framework through exactly these methods."""

from __future__ import annotations

from typing import ClassVar, Protocol

import torch

from benchmarks.adapter_config import Installation
from benchmarks.collective import Collective
from benchmarks.distenv import DistEnv


class CommTimer(Protocol):
    """Measures a framework's collectives for one step (total and exposed seconds).

    A timer whose numbers come from CUDA events sets `reads_late = True`: the loop then asks it when it
    reads the step's own phase times (two steps late, oldest first) instead of right after the step."""

    reads_late: bool

    def step_comm_s(self) -> tuple[float | None, float | None]:
        """(total collective seconds, exposed seconds) of the last step; None where not measured."""
        ...


class Framework(Protocol):
    """A framework adapter. Its launch facts (rendezvous, local launcher) are in its config class
    (benchmarks/frameworks/configs.py), where the launchers read them without torch."""

    name: ClassVar[str]
    rank: int
    local_rank: int
    world_size: int

    @classmethod
    def installation(cls) -> Installation:
        """What this framework's library is on this machine (`ddlbench doctor`); never raises."""
        ...

    @classmethod
    def preload(cls) -> None:
        """Import what this framework's ranks import only once they run (its library), in the process a CPU
        run's ranks fork from (launchers/lifecycle/forked_rank.py), so that they share it; nothing where none is late."""
        ...

    @classmethod
    def commbench_join(cls) -> tuple[int, int, int]:
        """Rendezvous.own only: join the library's group for commbench; (rank, local rank, world size).
        Torch-rendezvous frameworks run on the group commbench creates and raise NotImplementedError."""
        ...

    @classmethod
    def commbench_collective(cls, device: torch.device) -> Collective:
        """commbench's all-reduce through this framework's own communication path, on its group."""
        ...

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
