"""Node-local staging (launchers/lifecycle/staging.py): the copy (parallel, the exact tree, its marker), a failed copy
as one error on every node, the scratch path's variables, and the plan's refusal of a data set that does not fit."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from benchmarks.errors import ConfigError
from launchers.lifecycle import staging


def _tree(root, *, files: int = 24):
    """A small ImageFolder-like tree with a nested folder and files of varied sizes."""
    for i in range(files):
        path = root / f"class{i % 3}" / ("deep" if i % 5 == 0 else "") / f"img{i}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes([i]) * (100 + 37 * i))
    (root / "train-0.idx").write_text("0 10\n")  # a DALI index beside the records is copied too
    return root


def _listing(root):
    return sorted((p.relative_to(root).as_posix(), p.read_bytes()) for p in root.rglob("*") if p.is_file())


def test_the_copy_is_the_exact_tree_made_by_several_streams(tmp_path, monkeypatch):
    source = _tree(tmp_path / "data")
    threads: set[str] = set()
    copy = staging.shutil.copyfile

    def seen(src, dst):
        threads.add(threading.current_thread().name)
        time.sleep(0.005)  # as a file takes time: the other streams take the next files meanwhile
        return copy(src, dst)

    monkeypatch.setattr(staging.shutil, "copyfile", seen)  # only to see which threads copy
    record = staging.stage_node([str(source)], scratch=tmp_path / "scratch", run_name="r0", rank=0, streams=4)
    staged = tmp_path / "scratch" / "ddlbench-r0" / "data"
    assert record.paths == {str(source): str(staged)}
    assert _listing(staged) == _listing(source)
    assert (record.num_files, record.staged_bytes) == (25, sum(len(b) for _, b in _listing(source)))
    assert len(threads) > 1 and all(t.startswith("ddlbench-stage") for t in threads)
    assert staging.read_marker(tmp_path / "scratch", "r0") == record  # the marker, written last
    staging.release(tmp_path / "scratch", "r0", rank=0, local_rank=0)  # nobody reads it: its copier deletes it
    assert not (tmp_path / "scratch" / "ddlbench-r0").exists() and _listing(source)  # the original stays


def test_the_copy_stays_while_a_sibling_reads_it_and_goes_with_the_last_reader(tmp_path):
    """Local rank 0 failed first (its sibling still reads): the copy stays, and goes with the sibling; a rank that
    never registered (it failed before the copy was done) deletes nothing."""
    source = _tree(tmp_path / "data")
    staging.stage_node([str(source)], scratch=tmp_path / "scratch", run_name="r0", rank=4)  # registers rank 4
    folder = tmp_path / "scratch" / "ddlbench-r0"
    staging.register(folder, 5)
    staging.release(tmp_path / "scratch", "r0", rank=6, local_rank=2)  # never registered
    staging.release(tmp_path / "scratch", "r0", rank=4, local_rank=0)  # the copier fails first
    assert (folder / staging.MARKER).exists() and _listing(folder / "data") == _listing(source)
    staging.release(tmp_path / "scratch", "r0", rank=5, local_rank=1)  # the last reader
    assert not folder.exists()


def test_a_killed_reader_holds_no_copy_and_a_copy_nobody_reads_is_swept(tmp_path):
    """A sibling SIGKILLed while reading leaves its reader file but no lock: the last rank to leave still deletes
    the copy. A copy whose every reader was killed is swept by the next staging on that scratch; one still read,
    and one still being made (no marker), are not."""
    source = _tree(tmp_path / "data")
    scratch = tmp_path / "scratch"
    staging.stage_node([str(source)], scratch=scratch, run_name="r0", rank=0)
    folder = scratch / "ddlbench-r0"
    code = (
        f"from launchers.lifecycle import staging; from pathlib import Path; staging.register(Path({str(folder)!r}), 1)"
    )
    subprocess.run([sys.executable, "-c", f"{code}; import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert (folder / staging.READER.format(rank=1)).exists()  # its file stays, its lock went with it
    staging.release(scratch, "r0", rank=0, local_rank=0)
    assert not folder.exists()

    for name in ("dead", "live"):
        staging.stage_node([str(source)], scratch=scratch, run_name=name, rank=0)
    os.close(staging._held.pop(scratch / "ddlbench-dead" / staging.READER.format(rank=0)))  # as a killed rank's
    (scratch / "ddlbench-making").mkdir()  # a copy under way: no marker yet
    staging.stage_node([str(source)], scratch=scratch, run_name="next", rank=0)
    assert sorted(p.name for p in scratch.iterdir()) == ["ddlbench-live", "ddlbench-making", "ddlbench-next"]
    for name in ("live", "next"):
        staging.release(scratch, name, rank=0, local_rank=0)


def test_a_folder_the_copy_cannot_list_fails_it_and_a_link_loop_is_copied_once(tmp_path, monkeypatch):
    """An unreadable class folder would leave the copy a class short, its labels shifted: the copy fails, naming
    it. A link to a parent folder is followed once, not until ELOOP."""
    source = _tree(tmp_path / "data")
    count = len([p for p in source.rglob("*") if p.is_file()])
    (source / "loop").symlink_to(source)
    files, _ = staging.copy_tree(source, tmp_path / "copy")
    assert files == count
    real_scandir = os.scandir

    def refuse(path="."):
        if str(path).endswith("/class1"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", refuse)
    with pytest.raises(staging.StagingError, match=r"cannot list .*class1 \(Permission denied\)"):
        staging.copy_tree(source, tmp_path / "copy2")


def test_a_failed_copy_is_one_line_on_its_node_and_names_it_on_the_others(tmp_path):
    source = _tree(tmp_path / "data", files=6)
    os.mkfifo(source / "class0" / "stuck.jpg")  # shutil.copyfile refuses a named pipe: a real failure mid-copy
    nodes = {0: 0.0, 1: 0.0}

    def reduce(value, op):  # the all-reduce over the two nodes' local rank 0 (max), as the framework does it
        assert op == "max"
        return max(value, *nodes.values())

    nodes[1] = 3.0  # the node of rank 2 failed (rank + 1)
    with pytest.raises(staging.StagingError) as error:
        staging.stage(
            [str(source)],
            local_scratch=str(tmp_path / "scratch1"),
            run_dir=tmp_path,
            rank=2,
            local_rank=0,
            reduce=reduce,
        )
    said = str(error.value)
    assert "\n" not in said and "stuck.jpg" in said and "named pipe" in said, said
    with pytest.raises(staging.StagingError, match=r"data staging failed on the node of rank 2 "):
        staging.stage(
            [str(source)],
            local_scratch=str(tmp_path / "scratch0"),
            run_dir=tmp_path,
            rank=1,
            local_rank=1,  # not the copying rank: it only waits, and learns the node of rank 2 failed
            reduce=reduce,
        )


def test_the_ranks_poll_while_a_long_copy_runs_and_go_on_when_it_ends(tmp_path, monkeypatch):
    """A copy longer than a collective's timeout never holds a rank in one collective: every poll_s each rank
    all-reduces whether a node still copies (0.5); the poll the copy's end completes lets every rank go on."""
    source = _tree(tmp_path / "data", files=4)
    copy = staging.shutil.copyfile

    def slow(src, dst):
        time.sleep(0.5)
        return copy(src, dst)

    monkeypatch.setattr(staging.shutil, "copyfile", slow)
    said: list[float] = []

    def reduce(value, op):  # one node: the all-reduce is this rank's own value
        said.append(value)
        return value

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    staged = staging.stage(
        [str(source)],
        local_scratch=str(tmp_path / "s"),
        run_dir=run_dir,
        rank=0,
        local_rank=0,
        reduce=reduce,
        poll_s=0.1,
    )
    assert said.count(0.5) >= 2 and said[-2:] == [0.0, 0.0], said  # polled while copying, then the visibility check
    files = sum(1 for p in source.rglob("*") if p.is_file())
    assert staged.num_files == files and [r.rank for r in staging.read_records(run_dir)] == [0]


def test_a_rank_that_cannot_see_its_nodes_copy_stops_every_rank(tmp_path):
    """Each rank of a node must see the copy its local rank 0 made (one system.local_scratch; containers bind
    it): a rank that does not says so, and the others name it."""
    source = _tree(tmp_path / "data", files=2)
    staging.stage_node([str(source)], scratch=tmp_path / "s", run_name=staging.run_name(tmp_path), rank=0)
    answers = iter([0.0, 4.0])  # the poll: every copy is done; the visibility check: rank 3 is blind
    with pytest.raises(staging.StagingError, match=r"rank 3 does not see its node's copy"):
        staging.stage(
            ["/nowhere"], local_scratch=str(tmp_path / "s"), run_dir=tmp_path, rank=1, local_rank=1,
            reduce=lambda value, op: max(value, next(answers)),
        )  # fmt: skip
    with pytest.raises(staging.StagingError, match=r"is missing on .*: local rank 0 of this node did not finish"):
        staging.stage(
            ["/nowhere"], local_scratch=str(tmp_path / "elsewhere"), run_dir=tmp_path, rank=3, local_rank=1,
            reduce=lambda value, op: value,
        )  # fmt: skip


def test_the_scratch_name_tells_two_run_roots_apart(tmp_path):
    one, two = tmp_path / "a" / "c" / "cell-r0", tmp_path / "b" / "c" / "cell-r0"
    assert staging.run_name(one, environ={}) != staging.run_name(two, environ={})
    assert staging.run_name(one, environ={"SLURM_JOB_ID": "7"}).startswith("7-cell-r0-")


def test_the_summary_takes_the_slowest_node(tmp_path):
    records = [
        staging.NodeStaging(rank=n, host="h", root="/s", paths={}, num_files=2, staged_bytes=2_000_000_000, staging_s=s)
        for n, s in ((1, 4.0), (0, 2.0))
    ]
    assert staging.summary_fields(records) == {
        "staging_s": 4.0,
        "staging_bytes": 2_000_000_000,
        "staging_gb_s_per_node": 0.5,
        "staging_s_by_node": [2.0, 4.0],
    }
    assert staging.summary_fields([]) == {}


def test_the_scratch_path_expands_the_nodes_variables():
    assert str(staging.scratch_root("$SLURM_TMPDIR/x", environ={"SLURM_TMPDIR": "/local/job1"})) == "/local/job1/x"
    assert str(staging.scratch_root("${TMPDIR}", environ={"TMPDIR": "/tmp/j"})) == "/tmp/j"
    with pytest.raises(staging.StagingError, match=r"\$SLURM_TMPDIR is not set on "):
        staging.scratch_root("$SLURM_TMPDIR", environ={})
    with pytest.raises(ConfigError, match="needs system.local_scratch"):
        staging.scratch_root(None)


def test_a_staged_run_needs_data_and_a_scratch(compose, tmp_path):
    from benchmarks.validate import validate

    source = _tree(tmp_path / "data")
    with pytest.raises(ConfigError, match="names no system.local_scratch; pass"):
        validate(compose(["loader=native", f"data.path={source}", "data.stage=node_local"]), check_device=False)
    with pytest.raises(ConfigError, match="loader=synthetic reads no data set"):
        validate(compose(["data.stage=node_local", "system.local_scratch=/tmp"]), check_device=False)


def test_a_campaign_refuses_a_data_set_larger_than_the_scratch(no_slurm, tmp_path, monkeypatch):
    """The plan (campaign plan and submit) lists the cells whose data set would not fit, with both sizes."""
    from benchmarks.data.synth import synth_imagefolder
    from launchers.campaign import plan, reasons

    data = tmp_path / "data"
    synth_imagefolder(data, num_classes=2, images_per_class=4, width=32, height=24, quality=90, seed=0, progress=False)
    size_gb = staging.dataset_bytes(str(data)) / 1e9
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "tiny.yaml").write_text(
        "# @package _global_\nmodel:\n  arch: simple_cnn\nrun:\n  campaign: tiny\n  per_gpu_batch: 2\n"
        "campaign:\n  gpus: [1]\n  repeats: 1\n  axes:\n    data.stage: [none, node_local]\n"
    )
    monkeypatch.setenv("DDLBENCH_CONFIG", str(tmp_path))
    base = ["experiment=tiny", "system=slurm_cpu", "loader=native", f"data.path={data}"]
    _, cells = plan([*base, "system.local_scratch_gb=0.000001"])
    assert [c.problem is None for c in cells] == [True, False]
    [(count, reason)] = reasons(cells)
    assert count == 1 and f"is {size_gb:.3g} GB but system.local_scratch_gb=1e-06 GB per node" in reason, reason
    _, cells = plan([*base, "system.local_scratch_gb=1"])  # it fits
    assert [c.problem for c in cells] == [None, None]
    assert len({c.run_dir for c in cells}) == 2  # data.stage is part of the cell


def test_without_flock_the_reader_files_alone_keep_the_copy(tmp_path, monkeypatch):
    """A scratch whose file system refuses flock (Lustre mounted noflock): registering still works, and a copy
    goes with its last reader's file."""
    import errno

    def refuse(fd, op):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(staging.fcntl, "flock", refuse)
    source = _tree(tmp_path / "data")
    staging.stage_node([str(source)], scratch=tmp_path / "scratch", run_name="r0", rank=0)
    folder = tmp_path / "scratch" / "ddlbench-r0"
    staging.register(folder, 1)
    staging.release(tmp_path / "scratch", "r0", rank=0, local_rank=0)
    assert folder.exists()  # rank 1's file is there
    staging.release(tmp_path / "scratch", "r0", rank=1, local_rank=1)
    assert not folder.exists()
