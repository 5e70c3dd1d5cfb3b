"""Horovod: ring all-reduce of gradients through hvd.DistributedOptimizer (Gloo or MPI on CPU, NCCL on GPU).

The only module that imports horovod. Horovod 0.28.1 is built for today's torch by
tools/build_horovod.sh (`make horovod`).
"""

from __future__ import annotations

import os
import time
from typing import Any, ClassVar

import torch

from benchmarks.adapter_config import Installation
from benchmarks.collective import ROOT, Collective, Op
from benchmarks.distenv import DistEnv
from benchmarks.errors import ConfigError
from benchmarks.frameworks.base import CommTimer
from benchmarks.frameworks.configs import HorovodConfig


def _import_horovod() -> Any:
    try:
        import horovod.torch as hvd
    except ModuleNotFoundError:
        raise ConfigError(
            "framework=horovod needs the horovod package; run 'make horovod' (see README#horovod)"
        ) from None
    except ImportError as error:  # installed but built against another torch / missing libraries
        raise ConfigError(
            f"framework=horovod: the horovod package does not load ({error}); rebuild it with 'make horovod' (see README#horovod)"
        ) from None
    return hvd


class _SynchronizeTimer:
    """Exposed all-reduce wait of the last update step: the time optimizer.synchronize() blocked.

    The gradient all-reduces run in Horovod's background thread during backward; what is left when
    backward returns is the communication the step waits for. The total all-reduce time is not seen
    from here (Horovod's timeline has it: framework.timeline=true)."""

    reads_late: ClassVar[bool] = False  # read right after its step

    def __init__(self) -> None:
        self.exposed_s: float | None = None

    def step_comm_s(self) -> tuple[float | None, float | None]:
        return None, self.exposed_s


class Horovod:
    name: ClassVar[str] = "horovod"

    def __init__(self, config: HorovodConfig) -> None:
        config.check()
        self._hvd = _import_horovod()
        self.config = config
        self.rank = self.local_rank = 0
        self.world_size = 1
        self.device = torch.device("cpu")
        self._optimizer: Any = None
        self._scaler: torch.amp.GradScaler | None = None
        self._timer: _SynchronizeTimer | None = None
        self._passes = 0
        self._weights_layout = "not set up"
        self._timeline_path: str | None = None

    @classmethod
    def preload(cls) -> None:
        """Nothing: horovodrun and mpirun start every rank as a fresh Python, never as a fork."""

    @classmethod
    def installation(cls) -> Installation:
        """Version and the collective backends this horovod was built with."""
        try:
            hvd = _import_horovod()
        except ConfigError as error:
            return Installation(ok=False, detail=str(error).split(";")[0], fix="make horovod")
        import horovod

        built = {
            op: bool(check())
            for op, check in (("gloo", hvd.gloo_built), ("mpi", hvd.mpi_built), ("nccl", hvd.nccl_built))
        }
        # horovodrun --gloo needs Gloo, mpirun/srun MPI: a build with neither runs nothing
        ok = built["gloo"] or built["mpi"]
        detail = f"{horovod.__version__}: " + ", ".join(f"{op} {'yes' if yes else 'no'}" for op, yes in built.items())
        # without NCCL operations a GPU run's tensors are reduced through host memory over Gloo or MPI
        gpu_fix = (
            ""
            if built["nccl"]
            else "built without NCCL: on a machine with a GPU, CUDA's nvcc and torch's NCCL, run make horovod "
            "(HOROVOD_OPS=nccl forces it; docs/horovod.md)"
        )
        return Installation(
            ok=ok, detail=detail, fix="" if ok else "make horovod", gpu_ok=built["nccl"], gpu_fix=gpu_fix
        )

    @classmethod
    def commbench_join(cls) -> tuple[int, int, int]:
        hvd = _import_horovod()
        hvd.init()
        return hvd.rank(), hvd.local_rank(), hvd.size()

    @classmethod
    def commbench_collective(cls, device: torch.device) -> Collective:
        """Horovod's collectives (after commbench_join). Horovod's out-of-place ops allocate their output, so
        out of place the result is copied into commbench's output (timed); it has no in-place all_gather,
        reduce_scatter or all_to_all and no point-to-point send/recv."""
        hvd = _import_horovod()
        rank = hvd.rank()

        def into(recv: torch.Tensor, result) -> None:
            recv.copy_(result[0] if isinstance(result, tuple) else result)  # alltoall may return (output, splits)

        def all_reduce_in(send, recv):
            hvd.allreduce_(recv, op=hvd.Sum, name="commbench.allreduce")

        def broadcast_in(send, recv):
            hvd.broadcast_(recv, root_rank=ROOT, name="commbench.broadcast")

        def broadcast_out(send, recv):
            # every rank passes a tensor; only the root's is read, and each rank gets its own copy back
            into(recv, hvd.broadcast(send, root_rank=ROOT, name="commbench.broadcast"))

        def reduced(x: float, op) -> float:
            return float(hvd.allreduce(torch.tensor([x], dtype=torch.float64), op=op, name="commbench.scalar").item())

        copied = "out-of-place: Horovod allocates the output; copied into commbench's output"
        return Collective(
            name="horovod",
            rank=rank,
            world_size=hvd.size(),
            all_reduce=Op(
                out_of_place=lambda s, r: into(r, hvd.allreduce(s, op=hvd.Sum, name="commbench.allreduce")),
                in_place=all_reduce_in,
                emulated=copied,
            ),
            all_gather=Op(
                out_of_place=lambda s, r: into(r, hvd.allgather(s, name="commbench.allgather")),
                in_place=None,
                emulated=copied,
            ),
            reduce_scatter=Op(
                out_of_place=lambda s, r: into(r, hvd.reducescatter(s, op=hvd.Sum, name="commbench.reducescatter")),
                in_place=None,
                emulated=copied,
            ),
            all_to_all=Op(
                out_of_place=lambda s, r: into(r, hvd.alltoall(s, name="commbench.alltoall")),
                in_place=None,
                emulated=copied,
            ),
            broadcast=Op(out_of_place=broadcast_out, in_place=broadcast_in, emulated=copied),
            send_recv=None,
            max_over_ranks=lambda x: reduced(x, hvd.Max),
            sum_over_ranks=lambda x: reduced(x, hvd.Sum),
            synchronize=(lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None),
            barrier=lambda: hvd.allreduce(torch.zeros(1), name="commbench.barrier"),
        )

    def init(self, env: DistEnv, device: torch.device) -> None:
        hvd = self._hvd
        # Horovod reads its tuning knobs from the environment once, in hvd.init()
        os.environ["HOROVOD_FUSION_THRESHOLD"] = str(int(self.config.fusion_threshold_mb * 1024 * 1024))
        os.environ["HOROVOD_CYCLE_TIME"] = str(self.config.cycle_time_ms)
        os.environ["HOROVOD_HIERARCHICAL_ALLREDUCE"] = "1" if self.config.hierarchical_allreduce else "0"
        if self.config.controller != "auto":
            # horovodrun --gloo sets HOROVOD_CONTROLLER=gloo; under mpirun the MPI build uses MPI
            os.environ["HOROVOD_CONTROLLER"] = self.config.controller
            os.environ["HOROVOD_CPU_OPERATIONS"] = self.config.controller
        if self.config.timeline:
            # written by rank 0 only; Chrome trace format (chrome://tracing, Perfetto)
            self._timeline_path = os.environ.get("HOROVOD_TIMELINE") or os.path.abspath("horovod_timeline.json")
            os.environ["HOROVOD_TIMELINE"] = self._timeline_path
        hvd.init()
        if (hvd.rank(), hvd.size(), hvd.local_rank()) != (env.rank, env.world_size, env.local_rank):
            raise RuntimeError(
                f"horovod sees rank {hvd.rank()}/{hvd.size()} local {hvd.local_rank()} but the launcher "
                f"environment ({env.source}) says {env.rank}/{env.world_size} local {env.local_rank}"
            )
        if self.config.adasum and not hvd.mpi_enabled():
            raise ConfigError(
                "framework.adasum=true needs Horovod's MPI controller (Adasum is implemented over MPI only); "
                "use framework.local_launcher=mpirun, or srun/mpirun under Slurm"
            )
        self.rank, self.local_rank, self.world_size = hvd.rank(), hvd.local_rank(), hvd.size()
        self.device = device
        # on CUDA the timer needs one stream sync per step, which costs throughput (docs/horovod.md)
        if self.config.comm_timer.enabled(device.type):
            self._timer = _SynchronizeTimer()
        if device.type == "cuda":
            # one GPU per rank; NCCL communicators and Horovod's streams live on this device
            torch.cuda.set_device(device)

    def setup(self, model, optimizer, *, amp_dtype):
        hvd = self._hvd
        if amp_dtype == torch.float16 and self.config.adasum:
            raise ConfigError(
                "framework.adasum=true with precision.amp_dtype=float16 is not supported; use amp_bf16 or fp32"
            )
        # Horovod refuses non-contiguous tensors ("Tensor is required to be contiguous"), and
        # channels_last weights (and so their gradients) are not contiguous. Keep the weights in the
        # default layout; the loader still hands channels_last inputs, the convolutions accept both.
        if any(not p.is_contiguous() for p in model.parameters()):
            model.to(memory_format=torch.contiguous_format)  # in place: the optimizer keeps its params
            self._weights_layout = "contiguous (NCHW): converted from channels_last, inputs stay channels_last"
        else:
            self._weights_layout = "contiguous (NCHW)"
        wrapped = hvd.DistributedOptimizer(
            optimizer,
            named_parameters=model.named_parameters(),
            compression=hvd.Compression.fp16 if self.config.fp16_compression else hvd.Compression.none,
            backward_passes_per_step=self.config.backward_passes_per_step,
            op=hvd.Adasum if self.config.adasum else hvd.Average,
        )
        # same start everywhere: rank 0's parameters and buffers, and its optimizer state.
        # hvd.broadcast_optimizer_state is not used: on a fresh optimizer it runs one step with zero
        # gradients to create the state, and weight decay then moves the weights before step 0.
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        wrapped.load_state_dict(
            hvd.broadcast_object(wrapped.state_dict(), root_rank=0, name="ddlbench.optimizer_state")
        )
        self._optimizer = wrapped
        # float16 gradients underflow without dynamic loss scaling; bfloat16 needs none
        self._scaler = torch.amp.GradScaler(self.device.type) if amp_dtype == torch.float16 else None
        return model, wrapped

    def backward(self, loss: torch.Tensor) -> None:
        # the optimizer's hooks start each gradient's all-reduce as soon as it is accumulated
        (self._scaler.scale(loss) if self._scaler else loss).backward()

    def step(self) -> None:
        assert self._optimizer is not None, "setup() before step()"
        self._passes += 1
        if self._passes % self.config.backward_passes_per_step:
            # gradient accumulation: Horovod all-reduces after backward_passes_per_step passes
            if self._timer:
                self._timer.exposed_s = None
            return
        optimizer = self._optimizer
        if self.config.adasum:
            # the Adasum optimizer reduces weight deltas inside step(): time the whole step
            t0 = time.perf_counter()
            optimizer.step()
            self._synchronize_device()
            if self._timer:
                self._timer.exposed_s = time.perf_counter() - t0
        else:
            if self._timer:
                # on CUDA, wait for the backward kernels first so the timed wait is communication only
                self._synchronize_device()
                t0 = time.perf_counter()
                optimizer.synchronize()
                self._timer.exposed_s = time.perf_counter() - t0
            else:
                optimizer.synchronize()
            with optimizer.skip_synchronize():
                if self._scaler:
                    self._scaler.step(optimizer)
                    self._scaler.update()
                else:
                    optimizer.step()
        # hvd's zero_grad takes no set_to_none; torch's default (set to None) applies
        optimizer.zero_grad()

    def _synchronize_device(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()

    def comm_timer(self) -> CommTimer | None:
        return self._timer

    def barrier(self) -> None:
        self._hvd.barrier()

    def all_reduce_scalar(self, x: float, op: str) -> float:
        hvd = self._hvd
        ops = {"sum": hvd.Sum, "max": hvd.Max, "min": hvd.Min}
        # a CPU tensor goes through Horovod's CPU operations (Gloo or MPI) also on a GPU build
        tensor = torch.tensor([x], dtype=torch.float64)
        return float(hvd.allreduce(tensor, op=ops[op], name=f"ddlbench.scalar.{op}").item())

    def host_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        # every rank holds the whole model (Horovod does not shard or wrap it)
        module = getattr(model, "_orig_mod", model)  # torch.compile's wrapper
        return {k: v.detach().cpu() for k, v in module.state_dict().items()}

    def shutdown(self) -> None:
        if self._hvd.is_initialized():
            self._hvd.shutdown()

    def describe(self) -> dict:
        hvd = self._hvd
        import horovod

        return {
            "framework": self.name,
            "horovod": horovod.__version__,
            "torch": torch.__version__,
            "built": {"gloo": bool(hvd.gloo_built()), "mpi": bool(hvd.mpi_built()), "nccl": hvd.nccl_built()},
            "controller": "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "unknown",
            "gpu_allreduce": "nccl" if self.device.type == "cuda" and hvd.nccl_built() else "cpu",
            "fusion_threshold_mb": self.config.fusion_threshold_mb,
            "cycle_time_ms": self.config.cycle_time_ms,
            "fp16_compression": self.config.fp16_compression,
            "op": "adasum" if self.config.adasum else "average",
            "backward_passes_per_step": self.config.backward_passes_per_step,
            "hierarchical_allreduce": self.config.hierarchical_allreduce,
            "weights_memory_format": self._weights_layout,
            "comm_timer": None
            if self._timer is None
            else (
                "step() wall time (Adasum reduces inside step)"
                if self.config.adasum
                else "exposed wait in optimizer.synchronize()"
                + (" after a CUDA stream synchronize" if self.device.type == "cuda" else "")
            ),
            "timeline": self._timeline_path,
        }
