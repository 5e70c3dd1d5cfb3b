"""Rank, local rank, world size and rendezvous from each launcher's variables."""

import pytest

from benchmarks.distenv import from_environ
from benchmarks.errors import ConfigError
from launchers.programs.base import first_host


def test_single_process():
    env = from_environ({})
    assert (env.rank, env.world_size, env.local_rank, env.source) == (0, 1, 0, "single")


def test_torchrun():
    env = from_environ(
        {
            "RANK": "3",
            "WORLD_SIZE": "8",
            "LOCAL_RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "node7",
            "MASTER_PORT": "1234",
        }
    )
    assert (env.rank, env.world_size, env.local_rank, env.num_nodes) == (3, 8, 1, 4)
    assert (env.master_addr, env.master_port, env.source) == ("node7", 1234, "torchrun")


def test_slurm():
    env = from_environ(
        {
            "SLURM_PROCID": "5",
            "SLURM_NTASKS": "8",
            "SLURM_LOCALID": "1",
            "SLURM_NNODES": "2",
            "SLURM_JOB_NODELIST": "jwb[0042-0043]",
            "SLURM_JOB_ID": "123456",
        }
    )
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size, env.num_nodes) == (5, 8, 1, 4, 2)
    assert env.master_addr == "jwb0042"
    assert env.master_port == 20000 + 123456 % 20000
    assert env.source == "slurm"


def test_openmpi_wins_over_slurm_under_mpirun_in_a_job():
    env = from_environ(
        {
            "OMPI_COMM_WORLD_RANK": "2",
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": "0",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            "SLURM_PROCID": "0",
            "SLURM_NTASKS": "1",
            "SLURM_JOB_NODELIST": "gpu01,gpu02",
        }
    )
    assert (env.rank, env.world_size, env.local_rank, env.num_nodes, env.source) == (2, 4, 0, 2, "openmpi")
    assert env.master_addr == "gpu01"


def test_pmix():
    env = from_environ({"PMIX_RANK": "1", "PMIX_SIZE": "2"})
    assert (env.rank, env.world_size, env.source) == (1, 2, "pmix")


def test_export_round_trip():
    env = from_environ({"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "n1"})
    again = from_environ(env.export())
    assert (again.rank, again.world_size, again.master_addr, again.master_port) == (1, 2, "n1", env.master_port)


@pytest.mark.parametrize(
    ("nodelist", "host"),
    [
        ("node01", "node01"),
        ("gpu[007-009,012],login1", "gpu007"),
        ("jwb[0042]", "jwb0042"),
        ("a-b[3,5]", "a-b3"),
    ],
)
def test_first_host(nodelist, host):
    assert first_host(nodelist) == host


def test_bad_integer_names_the_variable():
    with pytest.raises(ConfigError, match="SLURM_NTASKS='two' is not an integer"):
        from_environ({"SLURM_PROCID": "0", "SLURM_NTASKS": "two"})


def test_horovodrun_gloo_sets_only_horovod_variables():
    # what `horovodrun --gloo -np 4 -H a:2,b:2` gives the second rank of host b
    env = from_environ(
        {
            "HOROVOD_RANK": "3",
            "HOROVOD_SIZE": "4",
            "HOROVOD_LOCAL_RANK": "1",
            "HOROVOD_LOCAL_SIZE": "2",
            "HOROVOD_CROSS_RANK": "1",
            "HOROVOD_CROSS_SIZE": "2",
            "HOROVOD_HOSTNAME": "b",
        }
    )
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size, env.num_nodes) == (3, 4, 1, 2, 2)
    assert env.source == "horovodrun"


def test_deepspeeds_launcher_names_the_local_size_local_size():
    env = from_environ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_SIZE": "1", "MASTER_ADDR": "a"})
    assert (env.world_size, env.local_world_size, env.num_nodes) == (2, 1, 2)
