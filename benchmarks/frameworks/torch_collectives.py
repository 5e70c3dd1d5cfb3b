"""barrier / scalar all-reduce / shutdown over torch.distributed, shared by DDP, FSDP, DP and DeepSpeed; and
the optimizer step with an optional gradient scaler, shared by the frameworks that leave the step to torch."""

from __future__ import annotations

import gc
import sys
from datetime import timedelta
from typing import ClassVar

import torch
import torch.distributed as dist

from benchmarks.collective import Collective
from benchmarks.distenv import DistEnv

_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


def init_process_group(env: DistEnv, device: torch.device, *, backend: str) -> str:
    """Join the run's torch.distributed group at the launcher's rendezvous; backend auto: nccl on GPU, gloo on
    CPU. Returns the backend used."""
    if backend == "auto":
        backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(
        backend=backend,
        init_method=f"tcp://{env.master_addr}:{env.master_port}",
        rank=env.rank,
        world_size=env.world_size,
        timeout=timedelta(minutes=10),
        **({"device_id": device} if device.type == "cuda" else {}),
    )
    return backend


class TorchCollectives:
    name: ClassVar[str]
    device: torch.device
    backend: str  # a torch.distributed backend name, or "auto" until init()

    def init(self, env: DistEnv, device: torch.device) -> None:
        """Join the run's torch.distributed group (DDP, FSDP); DeepSpeed and DP start theirs themselves."""
        self.rank, self.local_rank, self.world_size = env.rank, env.local_rank, env.world_size
        self.device = device
        self.backend = init_process_group(env, device, backend=self.backend)

    @classmethod
    def preload(cls) -> None:
        """torch.distributed is imported with torch: nothing is late."""

    @classmethod
    def commbench_join(cls) -> tuple[int, int, int]:
        raise NotImplementedError(f"{cls.name} runs on the torch.distributed group commbench creates")

    @classmethod
    def commbench_collective(cls, device: torch.device) -> Collective:
        """torch.distributed's collectives on commbench's group: what DDP, FSDP and DP communicate through."""
        from benchmarks.frameworks import torch_dist

        return torch_dist.collective(device)

    def barrier(self) -> None:
        if dist.is_initialized():
            dist.barrier()

    def all_reduce_scalar(self, x: float, op: str) -> float:
        if not dist.is_initialized():
            return x
        # NCCL reduces CUDA tensors only; gloo CPU tensors
        tensor = torch.tensor([x], dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor, op=_OPS[op])
        return float(tensor.item())

    def host_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        # the plain module's names, whatever wrapper (DDP, an engine) is around it
        module = getattr(model, "module", model)
        return {k: v.detach().cpu() for k, v in module.state_dict().items()}

    def release(self) -> None:
        """Drop what the adapter holds of the wrapped model (engine, optimizer, comm hook state)."""

    def shutdown(self) -> None:
        """Barrier, then drop the wrapped model, then destroy the process group.

        The barrier: no rank tears its group down while another still runs a collective on it (after
        a failure it is skipped: the other ranks may never reach it). The wrapped model goes before the
        group (DDP's reducer and a DeepSpeed engine hold the group and sit in reference cycles: left to
        the interpreter's exit they would be destroyed after it). Even so DDP's reducer keeps the gloo
        backend, and its worker threads, alive until the process ends; __main__ therefore ends the rank
        without interpreter finalization (launchers/lifecycle/forked_rank.py).
        """
        if not dist.is_initialized():
            return
        if sys.exc_info()[0] is None:
            dist.barrier()
        self.release()
        gc.collect()
        dist.destroy_process_group()
        gc.collect()


class ScaledStep:
    """backward and step for the frameworks that leave the optimizer to torch (DDP, FSDP, DP): under float16
    a gradient scaler (`_scaler`, set by setup()) scales the loss and unscales before the step."""

    _optimizer: torch.optim.Optimizer | None
    _scaler: torch.amp.GradScaler | None

    def scaled_backward(self, loss: torch.Tensor) -> None:
        (self._scaler.scale(loss) if self._scaler else loss).backward()

    def step(self) -> None:
        assert self._optimizer is not None, "setup() before step()"
        if self._scaler:
            self._scaler.step(self._optimizer)
            self._scaler.update()
        else:
            self._optimizer.step()
        self._optimizer.zero_grad(set_to_none=True)
