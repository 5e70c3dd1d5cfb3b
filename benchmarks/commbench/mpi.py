"""Plain MPI through mpi4py: the site's MPI on the same nodes, beside NCCL, gloo and Horovod.

Started by mpirun (or srun --mpi=pmix); the ranks join in MPI_Init, so it runs alone (Rendezvous.own).
It moves host memory: the tensors are CPU tensors handed to MPI as buffers (a CUDA-aware MPI could take
GPU buffers, but one that is not crashes, so commbench does not try). MPI has every op in both forms
except reduce_scatter in place, whose result MPI puts at the start of the buffer rather than at the
rank's part (nccl-tests' layout); out-of-place broadcast copies the input into the output on the root,
then broadcasts in place. The only module that imports mpi4py (tests/unit/test_import_graph.py).
"""

from __future__ import annotations

import atexit

import torch

from benchmarks.adapter_config import Installation
from benchmarks.collective import ROOT, Collective, Op
from benchmarks.errors import ConfigError

FIX = "pip install 'ddlbench[mpi]' (mpi4py) in this environment, with an MPI library such as OpenMPI installed"


def _mpi():
    try:
        from mpi4py import MPI
    except ModuleNotFoundError:
        raise ConfigError(f"--backends mpi needs the mpi4py package, which this Python lacks; run {FIX}") from None
    except (ImportError, RuntimeError) as error:  # mpi4py is there, the MPI library it loads is not
        said = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(
            f"--backends mpi: mpi4py cannot load an MPI library ({said}); install one "
            "(apt-get install -y openmpi-bin, or the site's module load openmpi)"
        ) from None
    return MPI


class MPIBackend:
    """The commbench side of a framework adapter (installation, commbench_join, commbench_collective), for MPI."""

    name = "mpi"

    @classmethod
    def installation(cls) -> Installation:
        try:
            MPI = _mpi()
        except ConfigError as error:
            return Installation(ok=False, detail=str(error), fix=FIX)
        import mpi4py

        return Installation(ok=True, detail=f"mpi4py {mpi4py.__version__}: {MPI.Get_library_version().splitlines()[0]}")

    @classmethod
    def commbench_join(cls) -> tuple[int, int, int]:
        MPI = _mpi()
        # the rank ends in os._exit (launchers/lifecycle/forked_rank.py), after the atexit handlers but before mpi4py's own
        # finalization: without MPI_Finalize here mpirun reports the job as failed
        atexit.register(lambda: MPI.Is_finalized() or MPI.Finalize())
        world = MPI.COMM_WORLD
        local = world.Split_type(MPI.COMM_TYPE_SHARED)
        return world.Get_rank(), local.Get_rank(), world.Get_size()

    @classmethod
    def commbench_collective(cls, device: torch.device) -> Collective:
        MPI = _mpi()
        comm = MPI.COMM_WORLD
        rank, n = comm.Get_rank(), comm.Get_size()
        if device.type != "cpu":
            raise ConfigError(
                f"--backends mpi moves host memory; --device {device.type} is not for it: pass --device cpu"
            )

        def np(t: torch.Tensor):
            return t.numpy()

        def all_reduce_out(s, r):
            comm.Allreduce(np(s), np(r), op=MPI.SUM)

        def all_reduce_in(s, r):
            comm.Allreduce(MPI.IN_PLACE, np(r), op=MPI.SUM)

        def all_gather_in(s, r):
            comm.Allgather(MPI.IN_PLACE, np(r))

        def all_to_all_in(s, r):
            comm.Alltoall(MPI.IN_PLACE, np(r))

        def broadcast(s, r):
            if r is not s and rank == ROOT:
                r.copy_(s)
            comm.Bcast(np(r), root=ROOT)

        def send_recv_out(s, r):
            comm.Sendrecv(np(s), dest=(rank + 1) % n, recvbuf=np(r), source=(rank - 1) % n)

        def send_recv_in(s, r):
            comm.Sendrecv_replace(np(r), dest=(rank + 1) % n, source=(rank - 1) % n)

        return Collective(
            name="mpi",
            rank=rank,
            world_size=n,
            all_reduce=Op(out_of_place=all_reduce_out, in_place=all_reduce_in),
            all_gather=Op(out_of_place=lambda s, r: comm.Allgather(np(s), np(r)), in_place=all_gather_in),
            reduce_scatter=Op(
                out_of_place=lambda s, r: comm.Reduce_scatter_block(np(s), np(r), op=MPI.SUM), in_place=None
            ),
            all_to_all=Op(out_of_place=lambda s, r: comm.Alltoall(np(s), np(r)), in_place=all_to_all_in),
            broadcast=Op(
                out_of_place=broadcast,
                in_place=broadcast,
                emulated="out-of-place: copy into the output on the root, then in place",
            ),
            send_recv=Op(out_of_place=send_recv_out, in_place=send_recv_in),
            max_over_ranks=lambda x: float(comm.allreduce(x, op=MPI.MAX)),
            sum_over_ranks=lambda x: float(comm.allreduce(x, op=MPI.SUM)),
            synchronize=lambda: None,
            barrier=comm.Barrier,
        )
