"""DeepSpeed: deepspeed.initialize with ZeRO stages 0-3 and bf16/fp16 (gloo on CPU, NCCL on GPU).

The only module that imports deepspeed; it is imported lazily, so `import benchmarks` works without it.
Nothing is JIT-compiled on the way to the first step: the model comes with a torch optimizer (no
fused_adam build) and the shared-memory inference all-reduce op (deepspeed_shm_comm, compiled by
init_distributed on CPU machines) is marked unavailable before the process group is created.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import torch

from benchmarks.adapter_config import Installation
from benchmarks.collective import Collective
from benchmarks.distenv import DistEnv
from benchmarks.errors import ConfigError
from benchmarks.frameworks.base import CommTimer
from benchmarks.frameworks.configs import DeepSpeedConfig
from benchmarks.frameworks.torch_collectives import TorchCollectives

INSTALL_HINT = "pip install -e '.[deepspeed]'"
# where DeepSpeed's op builder puts anything it compiles: outside the checkout, kept between runs
EXTENSIONS_DIR = Path.home() / ".cache" / "ddlbench" / "torch_extensions"
_UNCOMPILED_OPS = ("deepspeed_shm_comm",)


def _import_deepspeed(device: torch.device) -> Any:
    # DeepSpeed picks its accelerator at import; saying which one silences the CPU-fallback warning
    os.environ.setdefault("DS_ACCELERATOR", "cuda" if device.type == "cuda" else "cpu")
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(EXTENSIONS_DIR))
    import deepspeed
    import deepspeed.ops

    # ZeRO calls torch's all_gather_into_tensor/reduce_scatter_tensor, which torch 2.14 deprecates
    # with a warning per call: one run's log would be mostly these lines
    warnings.filterwarnings("ignore", message=r"`torch\.distributed\.\w+` is deprecated", category=FutureWarning)
    deepspeed.utils.logger.setLevel(logging.WARNING)  # its INFO lines (config dumps) drown the benchmark's
    # the first read of __compatible_ops__ probes every op (compiler test runs); its only reader is
    # init_distributed's shm_comm check, whose answer must be no: seed the dict instead of probing
    vars(deepspeed.ops).setdefault("__compatible_ops__", {})
    for op in _UNCOMPILED_OPS:
        deepspeed.ops.__compatible_ops__[op] = False
    return deepspeed


def ds_config(config: DeepSpeedConfig, *, amp_dtype: torch.dtype | None, comms_logger: bool) -> dict:
    """The DeepSpeed JSON config of these settings (pure: tests and meta.json read it)."""
    zero: dict[str, Any] = {"stage": config.zero_stage}
    if config.zero_stage >= 1:
        zero |= {
            "reduce_bucket_size": config.reduce_bucket_size,
            "allgather_bucket_size": config.allgather_bucket_size,
            "overlap_comm": config.overlaps_comm(),  # written as meant, whatever DeepSpeed's default becomes
            "contiguous_gradients": config.contiguous_gradients,
        }
    if config.zero_stage in (1, 2) and config.gradient_clipping == 0 and config.fp32_weights(amp=amp_dtype is not None):
        # ZeRO-1/2 compute the global gradient norm every step for clipping alone (fp32 weights have no
        # overflow check); nothing reads it when clipping is off. (Refused with engine bf16 at ZeRO-1.)
        zero["compute_grad_norm"] = False
    out: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": config.train_micro_batch_size_per_gpu,
        "gradient_accumulation_steps": config.gradient_accumulation_steps,
        "zero_optimization": zero,
        "zero_allow_untested_optimizer": True,  # the torch optimizer passed in (SGD) is not on its list
        # said always: DeepSpeed clips to a global norm of 1.0 unless told, which changes the training
        # (DDP and Horovod do not clip) and costs a norm over every gradient, an all-reduce and two
        # blocking host-to-device copies per step
        "gradient_clipping": config.gradient_clipping,
        "steps_per_print": 2**31 - 1,  # the loop reports progress; DeepSpeed's own lines would interleave
        # the engine's throughput timer synchronises the device twice per step by default, so the host can
        # never queue the next step ahead of the GPU; the loop times steps itself (CUDA events, read late)
        "timers": {"throughput": {"enabled": False}},
        "wall_clock_breakdown": config.wall_clock_breakdown,
    }
    if comms_logger:
        # only when wanted: DeepSpeed 0.19.8 turns its comms logger on whenever the config has this
        # section, whatever its "enabled" says, and the logger synchronises the device after every
        # collective, leaving the GPU idle each step (docs/deepspeed.md)
        out["comms_logger"] = {"enabled": True, "prof_all": True, "verbose": False, "debug": False}
    if amp_dtype is not None and config.mixed_precision == "autocast":
        # fp32 weights and optimizer, forward under torch.autocast: DDP's numerics and memory layout
        # (DeepSpeed adds its GradScaler for fp16 at ZeRO-0). Leaving torch_autocast out for bf16 and
        # relying on the loop's autocast alone is slower (docs/results/2026-11-29-h200.md).
        out["torch_autocast"] = {"enabled": True, "dtype": "bfloat16" if amp_dtype == torch.bfloat16 else "float16"}
        if config.reduce_dtype == "fp32":
            # DeepSpeed's torch_autocast tags Conv/Linear weights to have their gradients reduced in the
            # autocast dtype at ZeRO >= 1 (ZeRO-0 reduces fp32). No safe modules: fp32, as DDP reduces
            out["torch_autocast"]["lower_precision_safe_modules"] = []
    elif amp_dtype == torch.bfloat16:
        # 0.19.8 keeps buffers fp32 by default, and BatchNorm then fails on bf16 activations
        out |= {"bf16": {"enabled": True}, "data_types": {"buffer_dtype": "bf16"}}
    elif amp_dtype == torch.float16:
        out |= {
            "fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": config.initial_scale_power},
            "data_types": {"buffer_dtype": "fp16"},
        }
    return out


class _CommsLoggerTimer:
    """Per-step collective time from DeepSpeed's comms logger. The logger synchronises after every
    collective, so all of it is exposed (on CPU gloo collectives block the host anyway)."""

    reads_late: ClassVar[bool] = False  # read right after its step

    def __init__(self, comm_module: Any) -> None:
        self._comm = comm_module
        self._take_ms()  # drop what initialize() recorded (parameter broadcasts)

    def _take_ms(self) -> float:
        # one timer per collective name; its elapsed time accumulates until reset, so reset every step
        # (this also keeps the logger's per-call lists from growing over a long run)
        total_ms = sum(timer.elapsed(reset=True) for timer in self._comm.timers.timers.values())
        self._comm.comms_logger.comms_dict.clear()
        return total_ms

    def step_comm_s(self) -> tuple[float | None, float | None]:
        seconds = self._take_ms() / 1e3
        return seconds, seconds


class DeepSpeed(TorchCollectives):
    name: ClassVar[str] = "deepspeed"

    def __init__(self, config: DeepSpeedConfig) -> None:
        if importlib.util.find_spec("deepspeed") is None:
            raise ConfigError(
                f"framework=deepspeed needs the deepspeed package, which is not installed; run {INSTALL_HINT!r} (or 'make deepspeed')"
            )
        config.check()
        self.config = config
        self.weights_format = "contiguous (NCHW)"
        self.device = torch.device("cpu")  # until init()
        self.single_rank_allreduce: bool | None = None  # known after setup()
        self.rank = self.local_rank = 0
        self.world_size = 1
        self.ds_json: dict | None = None  # DeepSpeed's JSON config, made in setup()
        self._ds: Any = None
        self._engine: Any = None

    @classmethod
    def preload(cls) -> None:
        """DeepSpeed for the CPU (the only ranks that fork), and what the engine imports at its ZeRO optimizer
        check: its Muon optimizer, which imports torch's inductor (1.3 s of CPU per rank on the 2-core machine)."""
        _import_deepspeed(torch.device("cpu"))
        try:
            import deepspeed.runtime.zero.muon.muon_optimizer  # noqa: F401
        except ImportError:  # a DeepSpeed without Muon: the engine's check skips it too
            pass

    @classmethod
    def installation(cls) -> Installation:
        if importlib.util.find_spec("deepspeed") is None:
            return Installation(ok=False, detail="not installed", fix=f"make deepspeed ({INSTALL_HINT})")
        from importlib import metadata

        return Installation(ok=True, detail=metadata.version("deepspeed"))

    @classmethod
    def commbench_collective(cls, device: torch.device) -> Collective:
        """commbench's Collective over deepspeed.comm, on the torch.distributed group commbench created:
        the same ops, forms and gaps as torch.distributed's (benchmarks/frameworks/torch_dist.py)."""
        deepspeed = _import_deepspeed(device)
        import deepspeed.comm as ds_comm

        from benchmarks.frameworks import torch_dist

        deepspeed.init_distributed(dist_backend="nccl" if device.type == "cuda" else "gloo", auto_mpi_discovery=False)

        def reduced(x: float, op) -> float:
            t = torch.tensor([x], dtype=torch.float64, device=device)
            ds_comm.all_reduce(t, op=op)
            return float(t.item())

        return Collective(
            name="deepspeed",
            rank=ds_comm.get_rank(),
            world_size=ds_comm.get_world_size(),
            **torch_dist.ops(ds_comm),
            max_over_ranks=lambda x: reduced(x, ds_comm.ReduceOp.MAX),
            sum_over_ranks=lambda x: reduced(x, ds_comm.ReduceOp.SUM),
            synchronize=(lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None),
            barrier=ds_comm.barrier,
        )

    def _comms_logger_on(self) -> bool:
        # the comms logger synchronises after every collective: free on CPU, a serialising probe on GPU
        return self.config.comm_timer.enabled(self.device.type)

    def init(self, env: DistEnv, device: torch.device) -> None:
        self.rank, self.local_rank, self.world_size = env.rank, env.local_rank, env.world_size
        self.device = device
        # the engine reads LOCAL_RANK/RANK/WORLD_SIZE from the environment (srun and mpirun set none of them)
        os.environ.update(env.export())
        self._ds = _import_deepspeed(device)
        self._ds.init_distributed(
            dist_backend="nccl" if device.type == "cuda" else "gloo",
            auto_mpi_discovery=False,
            init_method=f"tcp://{env.master_addr}:{env.master_port}",
            rank=env.rank,
            world_size=env.world_size,
            timeout=timedelta(minutes=10),
            verbose=False,
        )

    def setup(self, model, optimizer, *, amp_dtype):
        accelerator = self._ds.get_accelerator()
        if amp_dtype == torch.float16 and not accelerator.is_fp16_supported():
            raise ConfigError(
                f"precision=amp_fp16 with framework=deepspeed is not supported on {self.device.type} "
                "(DeepSpeed's accelerator there has no fp16); use precision=amp_bf16 or precision=fp32"
            )
        self.ds_json = ds_config(self.config, amp_dtype=amp_dtype, comms_logger=self._comms_logger_on())
        wants_channels_last = any(
            p.dim() == 4 and not p.is_contiguous() and p.is_contiguous(memory_format=torch.channels_last)
            for p in model.parameters()
        )
        # DeepSpeed broadcasts each weight viewed as bytes (fails on channels_last weights) and flattens
        # them into contiguous buffers for bf16/fp16 and ZeRO >= 1. (Parameters keep their identity.)
        model.to(memory_format=torch.contiguous_format)
        engine, ds_optimizer, _, _ = self._ds.initialize(model=model, optimizer=optimizer, config=self.ds_json)
        self._engine = engine
        unflattened = self.config.zero_stage == 0 and self.config.fp32_weights(amp=amp_dtype is not None)
        if wants_channels_last and unflattened:
            # ZeRO-0 with fp32 weights keeps the module's own tensors: back to channels_last in place, so
            # cuDNN runs NHWC kernels without converting the weights on every call (as DDP does)
            engine.module.to(memory_format=torch.channels_last)
            self.weights_format = "channels_last (converted back after deepspeed.initialize)"
        elif wants_channels_last:
            self.weights_format = "contiguous (NCHW): flattened by DeepSpeed; inputs stay channels_last"
        self.single_rank_allreduce = True
        if self.world_size == 1 and self.config.zero_stage == 0:
            # one rank has nothing to all-reduce, but the engine still walks every gradient through its
            # bucketed all-reduce (flatten, divide, copy back: thousands of extra host ops per step;
            # docs/results/2026-11-29-h200.md); DDP likewise skips its wrapper at world size 1
            engine.enable_backward_allreduce = False
            self.single_rank_allreduce = False
        if amp_dtype is not None and self.config.mixed_precision == "engine":
            # the engine holds bf16/fp16 weights; float inputs follow them (autocast covers only some ops)
            engine.module.register_forward_pre_hook(_cast_inputs(amp_dtype))
        if self.rank == 0:
            print(
                f"[ddlbench] deepspeed ZeRO-{self.config.zero_stage}: {self.config.reduce_note()}",
                file=sys.stderr,
                flush=True,
            )
        return engine, ds_optimizer

    def backward(self, loss: torch.Tensor) -> None:
        # ZeRO-0: autograd first, then one all-reduce of every gradient (in buckets) inside this call
        self._engine.backward(loss)

    def step(self) -> None:
        # applies the update at a gradient-accumulation boundary only, then clears the gradients
        self._engine.step()

    def comm_timer(self) -> CommTimer | None:
        if self._engine is None or "comms_logger" not in self.ds_json:
            return None
        import deepspeed.comm.comm

        return _CommsLoggerTimer(deepspeed.comm.comm)

    def host_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        if self.config.zero_stage == 3:
            # ZeRO-3 keeps a shard of every parameter per rank: gather them for the copy, then re-shard
            with self._ds.zero.GatheredParameters(list(model.parameters()), modifier_rank=None):
                return super().host_state_dict(model)
        return super().host_state_dict(model)

    def release(self) -> None:
        # shutdown() (TorchCollectives: barrier, release, destroy): the engine holds the process group
        self._engine = None

    def _comms_logger_state(self) -> bool | None:
        """Whether DeepSpeed's comms logger (a device sync after every collective) is on, as the engine
        left it: what the config asked for is not always what DeepSpeed does."""
        if self._engine is None:
            return None
        import deepspeed.comm.comm

        return bool(deepspeed.comm.comm.comms_logger.enabled)

    def describe(self) -> dict:
        return {
            "framework": self.name,
            "backend": "nccl" if self.device.type == "cuda" else "gloo",
            "deepspeed": self._ds.__version__ if self._ds else None,
            "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None,
            **{k: v for k, v in self.config.settings().items() if k not in ("local_launcher", "comm_timer")},
            "comm_timer": "comms_logger (every collective blocking)"
            if self.ds_json and "comms_logger" in self.ds_json
            else None,
            "comms_logger_on": self._comms_logger_state(),
            "reduce_note": self.config.reduce_note(),
            "weights_format": self.weights_format,
            "single_rank_allreduce": self.single_rank_allreduce,
            "buffers": "per rank (not broadcast; DDP broadcasts them from rank 0 every forward)",
            "ds_config": self.ds_json,
        }


def _cast_inputs(dtype: torch.dtype):
    def hook(_module: torch.nn.Module, args: tuple) -> tuple:
        return tuple(a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)

    return hook
