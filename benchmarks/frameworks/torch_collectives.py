"""barrier / scalar all-reduce / shutdown over torch.distributed, shared by DDP and DeepSpeed."""
from __future__ import annotations

import torch
import torch.distributed as dist

_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


class TorchCollectives:
    device: torch.device

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

    def shutdown(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
