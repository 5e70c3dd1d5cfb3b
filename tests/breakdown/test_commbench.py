"""ddlbench commbench: nccl-tests' sizes, bus factors and table, the element check (it counts wrong outputs),
the launch argv, and 2-rank sweeps of the suite (gloo, DeepSpeed, Horovod, MPI) with every output checked."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from benchmarks.collective import OPS, Collective, Op
from benchmarks.commbench import (
    allreduce_busbw_factor,
    allreduce_measurement,
    bus_factor,
    layout,
    sizes,
)
from benchmarks.errors import ConfigError
from launchers.commbench import check_backends, commbench_command

RECORD_FIELDS = {"op", "backend", "world_size", "size_bytes", "time_s", "algbw_gb_s", "busbw_gb_s"}
SUITE_FIELDS = RECORD_FIELDS | {
    "in_place",
    "wrong",
    "count",
    "dtype",
    "redop",
    "root",
    "iters",
    "warmup_iters",
    "device",
    "emulated",
}


def test_sizes_are_powers_of_two_from_1_kib():
    assert sizes(1024, 8192) == [1024, 2048, 4096, 8192]
    assert sizes(1024, 4 * 1024**3)[-1] == 4 * 1024**3 and len(sizes(1024, 4 * 1024**3)) == 23


def test_bus_factors_are_nccl_tests():
    """doc/PERFORMANCE.md of nccl-tests: AllReduce 2(n-1)/n; ReduceScatter, AllGather, AlltoAll (n-1)/n;
    Broadcast 1; SendRecv (its sendrecv test) 1."""
    assert allreduce_busbw_factor(2) == 1.0 and allreduce_busbw_factor(8) == pytest.approx(1.75)
    assert {op: bus_factor(op, 8) for op in OPS} == pytest.approx(
        {
            "all_reduce": 1.75,
            "all_gather": 0.875,
            "reduce_scatter": 0.875,
            "all_to_all": 0.875,
            "broadcast": 1.0,
            "send_recv": 1.0,
        }
    )
    m = allreduce_measurement(backend="nccl", world_size=8, size_bytes=2**30, time_s=0.005)
    assert m.algbw_gb_s == pytest.approx(2**30 / 0.005 / 1e9)
    assert m.busbw_gb_s == pytest.approx(m.algbw_gb_s * 2 * 7 / 8)
    assert set(m.record()) == RECORD_FIELDS


def test_layouts_follow_nccl_tests():
    """S is the whole array; a per-rank part is a multiple of 16 bytes, so S can fall below the request."""
    ag = layout("all_gather", 1024, item_bytes=4, world_size=3)  # 256 floats / 3 = 85 -> 84 per rank
    assert (ag.send_count, ag.recv_count, ag.count, ag.size_bytes) == (84, 252, 84, 1008)
    rs = layout("reduce_scatter", 1024, item_bytes=4, world_size=3)
    assert (rs.send_count, rs.recv_count, rs.count, rs.size_bytes) == (252, 84, 84, 1008)
    a2a = layout("all_to_all", 1024, item_bytes=4, world_size=4)
    assert (a2a.send_count, a2a.recv_count, a2a.count, a2a.size_bytes) == (256, 256, 64, 1024)
    for op in ("all_reduce", "broadcast", "send_recv"):
        lay = layout(op, 1024, item_bytes=4, world_size=3)
        assert (lay.send_count, lay.recv_count, lay.count, lay.size_bytes) == (256, 256, 256, 1024)
    assert layout("all_gather", 16, item_bytes=4, world_size=8) is None  # no element per rank


@pytest.mark.parametrize("op", OPS)
def test_expected_outputs_are_what_the_collective_computes(op):
    """Every rank's expected output, from every rank's input and the op's definition, for 3 ranks."""
    import torch

    from benchmarks.commbench import suite

    n, cpu = 3, torch.device("cpu")
    lay = layout(op, 1024, item_bytes=4, world_size=n)
    data = [suite.inputs_and_expected(op, lay, rank=r, world_size=n, device=cpu) for r in range(n)]
    sends = [send for send, _ in data]
    part = lay.count
    for r, (_, want) in enumerate(data):
        reference = {
            "all_reduce": lambda: sum(sends),
            "all_gather": lambda: torch.cat(sends),
            "reduce_scatter": lambda: sum(sends)[r * part : (r + 1) * part],
            "all_to_all": lambda: torch.cat([s[r * part : (r + 1) * part] for s in sends]),
            "broadcast": lambda: sends[0],
            "send_recv": lambda: sends[(r - 1) % n],
        }[op]()
        assert torch.equal(want, reference), (op, r)
    assert len({tuple(s.tolist()) for s in sends}) == n  # inputs depend on the rank


def test_expected_sums_over_many_ranks_are_exact():
    """The reduced outputs' expected values (full cycles of PRIME ranks at once) equal the plain sum."""
    import torch

    from benchmarks.commbench import suite

    cpu = torch.device("cpu")
    for n in (1, 2, 96, 97, 98, 1024):
        plain = sum(suite.pattern(k, 5, 300, device=cpu).long() for k in range(n))
        assert torch.equal(suite._sum_over(n, 5, 300, cpu).long(), plain), n
    assert int(suite._sum_over(1024, 0, 10**4, cpu).max()) < 2**24  # exact in float32


def _one_rank(all_reduce: Op | None, **ops: Op | None) -> Collective:
    return Collective(
        name="fake",
        rank=0,
        world_size=1,
        all_reduce=all_reduce,
        all_gather=ops.get("all_gather"),
        reduce_scatter=None,
        all_to_all=None,
        broadcast=None,
        send_recv=None,
        max_over_ranks=lambda x: x,
        sum_over_ranks=lambda x: x,
        synchronize=lambda: None,
        barrier=lambda: None,
    )


def _copy(send, recv):
    if recv is not send:
        recv.copy_(send)


def _off_by_one(send, recv):
    _copy(send, recv)
    recv[:3] += 1


def test_the_check_counts_wrong_elements():
    import torch

    from benchmarks.commbench import suite

    kw = dict(device=torch.device("cpu"), size_list=[1024, 4096], warmup=1, iters=2)
    rows = suite.sweep(_one_rank(Op(out_of_place=_copy, in_place=_off_by_one)), ops=["all_reduce"], **kw)
    assert [(r.out_of_place.extra["wrong"], r.in_place.extra["wrong"]) for r in rows] == [(0, 3), (0, 3)]
    # a call that writes nothing is wrong everywhere: outputs start at -1, not at the timed calls' results
    rows = suite.sweep(
        _one_rank(
            Op(out_of_place=lambda s, r: None, in_place=None),
            all_gather=Op(out_of_place=None, in_place=lambda s, r: None),
        ),
        ops=["all_reduce", "all_gather"],
        **kw,
    )
    assert [
        (r.op, r.out_of_place and r.out_of_place.extra["wrong"], r.in_place and r.in_place.extra["wrong"]) for r in rows
    ] == [
        ("all_reduce", 256, None),
        ("all_reduce", 1024, None),
        ("all_gather", None, 0),
        ("all_gather", None, 0),
    ]  # in place, one rank's gather is its own input
    unchecked = suite.sweep(
        _one_rank(Op(out_of_place=_off_by_one, in_place=None)), ops=["all_reduce"], check=False, **kw
    )
    assert all(r.out_of_place.extra["wrong"] is None for r in unchecked)
    assert suite.sweep(_one_rank(None), ops=["all_reduce"], **kw) == []  # the library lacks it: no row
    # in place only, for an op that has no in-place form: no row (not an empty one the table trips on)
    no_in_place = _one_rank(Op(out_of_place=_copy, in_place=None))
    assert suite.sweep(no_in_place, ops=["all_reduce"], placements=(True,), **kw) == []
    from benchmarks.commbench.__main__ import format_nccl_tests

    assert format_nccl_tests([], backend="gloo", world_size=1, device="cpu", lacks=["all_reduce (in place)"])


def test_the_ranks_refuse_an_existing_out_file(tmp_path, capsys):
    from benchmarks.commbench.__main__ import main

    out = tmp_path / "old.json"
    out.write_text("[]")
    assert main(["--out", str(out), "--backends", "torch"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"ddlbench: error: --out {out} exists (never overwritten); pass another --out"
    )
    assert out.read_text() == "[]"


def test_the_table_has_nccl_tests_columns():
    import torch

    from benchmarks.commbench import suite
    from benchmarks.commbench.__main__ import format_nccl_tests

    comm = _one_rank(Op(out_of_place=_copy, in_place=None))
    rows = suite.sweep(comm, ops=["all_reduce"], device=torch.device("cpu"), size_list=[1024], warmup=0, iters=1)
    lines = format_nccl_tests(rows, backend="fake", world_size=1, device="cpu", lacks=comm.lacks()).splitlines()
    assert lines[1] == (
        "# fake lacks: all_reduce (in place), all_gather, reduce_scatter, all_to_all, broadcast, send_recv (N/A below)"
    )
    assert lines[5].split() == [
        "#",
        "size",
        "count",
        "type",
        "redop",
        "root",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "time",
        "algbw",
        "busbw",
        "#wrong",
    ]
    assert lines[6].split() == ["#", "(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)", "(us)", "(GB/s)", "(GB/s)"]
    row = lines[7]
    assert row[:12] == "        1024" and row.split()[:5] == ["1024", "256", "float", "sum", "-1"]
    assert row.split()[8] == "0" and row.split()[9:] == ["N/A"] * 4
    assert len(row) == len(lines[5])  # columns line up under the header


def test_launch_argv_reuses_the_run_launchers():
    argv = commbench_command(launcher="torchrun", nproc=4, master_port=29500, rank_args=["--out", "x.json"])
    assert argv == [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=4",
        "--master-port=29500",
        "-m",
        "benchmarks.commbench",
        "--out",
        "x.json",
    ]
    argv = commbench_command(launcher="horovodrun", nproc=2, master_port=0, rank_args=["--backends", "horovod"])
    assert argv[-4:] == ["-m", "benchmarks.commbench", "--backends", "horovod"] and "--gloo" in argv
    argv = commbench_command(launcher="mpirun", nproc=2, master_port=0, rank_args=["--backends", "mpi"])
    assert argv[:2] == ["mpirun", "-np"] and argv[-4:] == ["-m", "benchmarks.commbench", "--backends", "mpi"]


def test_user_errors_name_the_flag(tmp_path, cli):
    existing = tmp_path / "c.json"
    existing.write_text("[]")
    result = cli("commbench", "--out", str(existing))
    assert result.returncode == 2 and "--out" in result.stderr and "never overwritten" in result.stderr
    result = cli("commbench", "--backends", "torch,horovod", "--out", str(tmp_path / "d.json"))
    assert result.returncode == 2 and "--backends horovod" in result.stderr
    result = cli("commbench", "--ops", "all_reduce,allgather", "--out", str(tmp_path / "e.json"))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "ddlbench: error: --ops 'all_reduce,allgather': 'allgather' is no op; choose from "
        "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv or all"
    )


def test_mpi_without_mpi4py_is_one_line_naming_the_fix(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mpi4py" else real(name, *a))
    with pytest.raises(ConfigError) as error:
        check_backends(["mpi"], device="auto")
    assert str(error.value) == (
        "--backends mpi needs the mpi4py package, which this Python lacks; run pip install "
        "'ddlbench[mpi]' (mpi4py; needs an MPI library, e.g. apt-get install -y openmpi-bin)"
    )
    monkeypatch.undo()
    if real("mpi4py") is not None:
        with pytest.raises(ConfigError, match=r"^--backends mpi moves host memory .* pass --device auto or cpu$"):
            check_backends(["mpi"], device="cuda")


def _sweep(ddlbench, tmp_path, *args: str) -> tuple[list[dict], str]:
    out = tmp_path / "commbench.json"
    result = ddlbench(
        "commbench",
        "--nproc",
        "2",
        "--max-bytes",
        "4096",
        "--warmup",
        "1",
        "--iters",
        "2",
        "--out",
        str(out),
        *args,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(out.read_text()), result.stdout


def test_gloo_all_reduce_by_default_keeps_the_old_records(tmp_path, ddlbench):
    records, stdout = _sweep(ddlbench, tmp_path)
    assert [(r["size_bytes"], r["in_place"]) for r in records] == [
        (s, p) for s in (1024, 2048, 4096) for p in (False, True)
    ]
    for r in records:
        assert SUITE_FIELDS <= set(r)
        assert (r["op"], r["backend"], r["world_size"], r["device"], r["wrong"]) == ("all_reduce", "gloo", 2, "cpu", 0)
        assert r["time_s"] > 0 and r["algbw_gb_s"] == pytest.approx(r["size_bytes"] / r["time_s"] / 1e9)
        assert r["busbw_gb_s"] == pytest.approx(r["algbw_gb_s"])  # 2(n-1)/n = 1 at n = 2
        assert (r["iters"], r["warmup_iters"]) == (2, 1)
    assert "out-of-place" in stdout and "#wrong" in stdout


def test_gloo_suite_checks_every_op(tmp_path, ddlbench):
    records, stdout = _sweep(ddlbench, tmp_path, "--ops", "all")
    done = {(r["op"], r["in_place"]) for r in records}
    assert done == {(op, p) for op in OPS for p in (False, True)} - {("all_to_all", True), ("send_recv", True)}
    assert all(r["wrong"] == 0 for r in records)
    for r in records:
        assert r["busbw_gb_s"] == pytest.approx(r["algbw_gb_s"] * bus_factor(r["op"], 2))
    assert "# gloo lacks: all_to_all (in place), send_recv (in place) (N/A below)" in stdout
    for op in OPS:
        assert f"# {op}\n" in stdout


@pytest.mark.parametrize(
    "backend, module, lacks",
    [
        ("deepspeed", "deepspeed", {("all_to_all", True), ("send_recv", True)}),
        (
            "horovod",
            "horovod",
            {
                ("all_gather", True),
                ("reduce_scatter", True),
                ("all_to_all", True),
                ("send_recv", False),
                ("send_recv", True),
            },
        ),
        ("mpi", "mpi4py", {("reduce_scatter", True)}),
    ],
)
def test_other_backends_on_two_ranks(tmp_path, backend, module, lacks, ddlbench):
    """DeepSpeed's comm (on commbench's torch.distributed group), Horovod (horovodrun) and MPI (mpirun),
    through the Collectives their adapters build; every output checked."""
    if importlib.util.find_spec(module) is None:
        fix = {"mpi": "make mpi (pip install 'ddlbench[mpi]')"}.get(backend, f"make {backend}")
        pytest.skip(f"{module} is not installed: run {fix}")
    records, _ = _sweep(ddlbench, tmp_path, "--backends", backend, "--ops", "all", "--max-bytes", "2048")
    assert {(r["backend"], r["world_size"]) for r in records} == {(backend, 2)}
    assert {(r["op"], r["in_place"]) for r in records} == {(op, p) for op in OPS for p in (False, True)} - lacks
    assert all(r["wrong"] == 0 for r in records), [r for r in records if r["wrong"]]


@pytest.mark.filterwarnings("ignore::analysis.load.LogWarning")
def test_analysis_reads_old_and_new_files_and_types_the_suite_fields(tmp_path):
    from analysis.load import export_parquet, load_campaign

    old = {
        "op": "all_reduce",
        "backend": "gloo",
        "world_size": 2,
        "size_bytes": 1024,
        "time_s": 1e-4,
        "algbw_gb_s": 0.01,
        "busbw_gb_s": 0.01,
        "dtype": "float32",
        "iters": 20,
    }
    new = {**old, "op": "all_gather", "in_place": True, "wrong": 0, "count": 128, "redop": "none", "root": -1}
    unchecked = {**new, "in_place": False, "wrong": None}
    bad = {**new, "wrong": -3}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "commbench-old.json").write_text(json.dumps([old]))
    (tmp_path / "commbench-new.json").write_text(json.dumps([new, unchecked, bad]))
    campaign = load_campaign(tmp_path)
    bench = campaign.commbench.sort_values("op")
    assert list(bench["op"]) == ["all_gather", "all_gather", "all_reduce"]
    assert (str(bench["in_place"].dtype), str(bench["wrong"].dtype), str(bench["count"].dtype)) == (
        "boolean",
        "Int64",
        "Int64",
    )
    assert bench["in_place"].tolist()[:2] == [True, False] and bench["in_place"].isna().tolist() == [False, False, True]
    assert bench["wrong"].tolist()[:1] == [0] and bench["wrong"].isna().tolist() == [False, True, True]
    assert campaign.problems["problem"].tolist() == ["measurement 2: wrong -3 is not an integer >= 0; skipped"]
    assert export_parquet(campaign, tmp_path / "parquet")


@pytest.mark.parametrize("backend, srun_flags", [("torch", ()), ("mpi", ("--mpi=pmix",))])
def test_srun_starts_the_ranks(tmp_path, slurm_up, rank_processes, backend, srun_flags):
    """The documented srun line (docs/commbench.md) on the local Slurm: the ranks read Slurm's variables
    (benchmarks/distenv.py) for torch.distributed, and PMIx for MPI."""
    import os
    import subprocess

    from tests.conftest import REPO

    if backend == "mpi" and importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py is not installed: run make mpi (pip install 'ddlbench[mpi]')")
    out = tmp_path / f"commbench-srun-{backend}.json"
    argv = [
        "srun",
        "--nodes=1",
        "--ntasks=2",
        "--cpus-per-task=1",
        *srun_flags,
        sys.executable,
        "-m",
        "benchmarks.commbench",
        "--backends",
        backend,
        "--ops",
        "all_reduce,all_gather,send_recv",
        "--max-bytes",
        "2048",
        "--warmup",
        "1",
        "--iters",
        "2",
        "--device",
        "cpu",
        "--out",
        str(out),
    ]
    done = subprocess.run(
        argv,
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    records = json.loads(out.read_text())
    assert {(r["world_size"], r["wrong"]) for r in records} == {(2, 0)}
    assert {r["op"] for r in records} == {"all_reduce", "all_gather", "send_recv"}
