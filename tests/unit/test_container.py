"""launchers/container.py: each runtime's exact argv (apptainer exec, podman run, pyxis's srun flags), the Slurm
step's rank line inside a container, and the one-line refusals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks.errors import ConfigError
from launchers import container
from launchers.slurm import step_command


def system(runtime: str, image: str | None, *, device: str = "cpu", **spec) -> dict:
    return {
        "device": device,
        "env": {"OMP_NUM_THREADS": "1"},
        "container": {"runtime": runtime, "image": image, "binds": [], "env": [], "args": [], "python": "python3"}
        | spec,
        "launcher": "srun",
        "mpi": "pmix",
        "cpus_per_rank": 1,
        "cpu_bind": None,
        "mpirun_args": [],
    }


def made(runtime: str, image: str | None = "/img/ddlbench.sif", *, data: str = "/data/imagenet", **kw):
    return container.of(
        system(runtime, image, **kw), run_root="/scratch/runs", readable=[data], workdir="/scratch", environ={}
    )


P = str(container.PROJECT)


def by_depth(binds: list[str]) -> list[str]:
    """Parents first: a deeper mount after the one it lies in (by the destination's depth), at one depth the
    run's read-write folders last."""
    return sorted(binds, key=lambda b: (b.split(":")[1].rstrip("/").count("/"), not b.endswith(":ro"), b))


def test_apptainer_exec_binds_the_run_root_read_write_and_the_rest_read_only_and_nv_only_on_cuda(tmp_path):
    data = tmp_path / "imagenet"
    data.mkdir()
    binds = by_depth([f"{data}:{data}:ro", "/scratch:/scratch:ro", "/scratch/runs:/scratch/runs", f"{P}:{P}:ro"])
    assert container.prefix(made("apptainer", device="cuda", data=str(data))) == [
        "apptainer",
        "exec",
        "--nv",
        *(a for b in binds for a in ("--bind", b)),
        "/img/ddlbench.sif",
    ]
    assert "--nv" not in container.prefix(made("singularity"))
    assert container.prefix(made("singularity"))[:2] == ["singularity", "exec"]


def test_pyxis_is_srun_flags_and_no_prefix():
    c = made("pyxis", "/sq/pytorch.sqsh", env=["WANDB_MODE"])
    assert container.prefix(c) == []
    mounts = ",".join(c.binds)
    # the image's values win over the task's but for the names --container-env lists: the profile's, the
    # rendezvous (enroot's PyTorch hook writes its own), PYTHONPATH (and PYTHONSAFEPATH: no cwd before it), ddlbench's own and system.container.env's
    names = "OMP_NUM_THREADS,MASTER_ADDR,MASTER_PORT,PYTHONPATH,PYTHONSAFEPATH,DDLBENCH_CONTAINER,WANDB_MODE"
    assert container.srun_flags(c) == [
        "--container-image=/sq/pytorch.sqsh",
        f"--container-mounts={mounts}",
        "--container-workdir=/scratch",
        f"--container-env={names}",
    ]


def test_podman_run_passes_the_launchers_variables_and_is_removed_by_its_label():
    c = container.of(system("podman", "localhost/ddlbench:1"), run_root="/r", workdir="/r", token="t1")
    argv = container.prefix(c)
    # --pid=host: a rank's logged pid is its host pid (launchers/lifecycle/liveness.py tells a dead run by it)
    assert argv[:7] == [
        "podman",
        "run",
        "--rm",
        "--network=host",
        "--ipc=host",
        "--pid=host",
        "--label=ddlbench.run=t1",
    ]
    assert argv[-2:] == ["--workdir=/r", "localhost/ddlbench:1"]
    assert ["-e", "OMPI_*"] == argv[argv.index("OMPI_*") - 1 : argv.index("OMPI_*") + 1]
    assert ["-e", "OMP_NUM_THREADS"] == argv[argv.index("OMP_NUM_THREADS") - 1 : argv.index("OMP_NUM_THREADS") + 1]
    assert container.stop_argv(c) == ["podman", "rm", "--force", "--time=0", "--filter=label=ddlbench.run=t1"]
    assert container.stop_argv(made("apptainer")) is None


def test_none_is_no_container():
    assert container.of(system("none", None), run_root="/r") is None
    assert container.prefix(None) == [] and container.srun_flags(None) == []


def test_the_slurm_step_runs_each_rank_inside_the_image():
    c = made("apptainer")
    argv = step_command(system("apptainer", c.image), ntasks=4, ntasks_per_node=2, overrides=["a=1"], container=c)
    assert argv == [
        "srun",
        "--mpi=pmix",
        "--ntasks=4",
        "--ntasks-per-node=2",
        "--cpus-per-task=1",
        "--kill-on-bad-exit=1",
        *container.prefix(c),
        "python3",
        "-m",
        "benchmarks",
        "a=1",
    ]
    pyxis = made("pyxis", "/sq/x.sqsh")
    argv = step_command(system("pyxis", pyxis.image), ntasks=2, ntasks_per_node=2, overrides=[], container=pyxis)
    assert argv[6:9] == container.srun_flags(pyxis)[:3] and argv[-3:] == ["python3", "-m", "benchmarks"]


def test_refusals_name_the_key_and_the_fix(tmp_path):
    with pytest.raises(ConfigError, match=r"system.container.image"):
        made("podman", None)
    with pytest.raises(ConfigError, match=r"system.container.image=/no/such.sif is no file"):
        container.check(made("apptainer", "/no/such.sif"), launcher="srun", binaries=False)
    with pytest.raises(ConfigError, match=r"pyxis .* set system.launcher=srun"):
        container.check(made("pyxis", "/sq/x.sqsh"), launcher="mpirun")
    sif = tmp_path / "x.sif"
    sif.write_bytes(b"sif")
    with pytest.raises(ConfigError, match=r"`nosuchruntime` is not installed"):
        container.check(replace(made("apptainer", str(sif)), runtime="nosuchruntime"), launcher="srun")


def test_an_image_files_digest_is_computed_once(tmp_path):
    image = tmp_path / "x.sif"
    image.write_bytes(b"image")
    first = container.file_sha256(image, cache_dir=tmp_path / "cache")
    assert first == "sha256:" + __import__("hashlib").sha256(b"image").hexdigest()
    (cached,) = (tmp_path / "cache").iterdir()
    cached.write_text("sha256:cached\n")  # same path, size and mtime: read from the cache
    assert container.file_sha256(image, cache_dir=tmp_path / "cache") == "sha256:cached"


def test_a_dry_run_submit_shows_the_step_each_rank_runs_inside_the_image(cli, no_slurm, tmp_path, monkeypatch):
    """After the sbatch lines, the job step the first cell's job runs (launchers/slurm.py job_container and
    step_command, as the job builds them), the job's id as sbatch's %j; a container the job would refuse is
    refused before anything is queued."""
    monkeypatch.chdir(tmp_path)
    sif, runs = tmp_path / "ddlbench.sif", tmp_path / "runs"
    sif.touch()
    asked = [
        "experiment=slurm_smoke",
        "system=slurm_cpu",
        "system.container.runtime=apptainer",
        f"system.container.image={sif}",
        f"run.root={runs}",
    ]
    done = cli("campaign", "submit", *asked, "--dry-run")
    assert done.returncode == 0, done.stderr
    *sbatch_lines, line, total = done.stdout.strip().splitlines()
    assert len(sbatch_lines) == 2 and all(s.startswith("sbatch --parsable") for s in sbatch_lines)
    cell = "ddp-synthetic-simple_cnn-fp32-g1-n1-b8-75bcce07-r0"
    mounts = sorted([f"{tmp_path}:{tmp_path}:ro", f"{P}:{P}:ro", f"{runs}:{runs}"], key=lambda b: (b.count("/"), b))
    binds = " ".join(f"--bind {b}" for b in mounts)  # parents first, as the job binds them
    assert line == (
        f"[ddlbench] each rank runs (the job step of {cell}): srun --mpi=pmix --ntasks=1 --ntasks-per-node=1 "
        f"--cpus-per-task=1 --kill-on-bad-exit=1 apptainer exec {binds} {sif} python3 -m benchmarks "
        f"{' '.join(asked)} framework=ddp loader=synthetic run.repeat=0 run.dir={runs}/slurm_smoke/{cell}"
    ), line
    assert total.startswith("campaign slurm_smoke: would submit 2")
    # podman: the job's label, with sbatch's %j for the id the job gets
    podman = cli(
        "campaign",
        "submit",
        *asked[:2],
        "system.container.runtime=podman",
        "system.container.image=x:1",
        f"run.root={runs}",
        "--dry-run",
    )
    assert "podman run --rm --network=host --ipc=host --pid=host --label=ddlbench.run=slurm-%j " in podman.stdout
    # none: no line
    assert "each rank runs" not in cli("campaign", "submit", *asked[:2], f"run.root={runs}", "--dry-run").stdout
    refused = cli(
        "campaign",
        "submit",
        *asked[:2],
        "system.launcher=mpirun",
        "system.container.runtime=pyxis",
        "system.container.image=/sq/x.sqsh",
        f"run.root={runs}",
        "--dry-run",
    )
    assert refused.returncode == 2 and refused.stdout == ""
    (error,) = [line for line in refused.stderr.splitlines() if line.startswith("ddlbench: error:")]
    assert error.startswith("ddlbench: error: system.container.runtime=pyxis runs through srun's --container-image")


def test_a_staged_run_binds_the_node_local_scratch_read_write(tmp_path):
    """Each rank of a Slurm step runs in a container of its own (podman, pyxis: its own /tmp): a node's ranks
    share the copy its first rank stages only where system.local_scratch is bound from the host."""
    from benchmarks.config import compose

    base = ["system=slurm_cpu", "system.container.runtime=podman", "system.container.image=localhost/x:1"]
    base += [f"run.root={tmp_path / 'runs'}", f"data.path={tmp_path / 'data'}"]
    run_dir = tmp_path / "runs" / "c" / "cell"
    staged = container.for_run(
        compose([*base, "data.stage=node_local", f"system.local_scratch={tmp_path / 'scratch'}"]),
        run_dir=run_dir,
        token="t",
    )
    assert f"{tmp_path / 'scratch'}:{tmp_path / 'scratch'}" in staged.binds
    plain = container.for_run(compose(base), run_dir=run_dir, token="t")
    assert not any("scratch" in b for b in plain.binds)


def test_the_scratch_folder_bound_is_the_fixed_part_where_a_variable_is_set_on_the_nodes_only():
    from pathlib import Path

    from launchers.lifecycle.staging import scratch_mount

    assert scratch_mount("/tmp/node$GROUP_RANK", environ={}) == Path("/tmp")
    assert scratch_mount("/scratch/${SLURM_JOB_ID}/data", environ={}) == Path("/scratch")
    assert scratch_mount("$SLURM_TMPDIR", environ={"SLURM_TMPDIR": "/local/job7"}) == Path("/local/job7")
    assert scratch_mount("$TMPDIR", environ={}) is None
    assert scratch_mount(None) is None


def test_a_jobs_podman_clean_up_is_a_step_on_every_node():
    from launchers.slurm import every_node

    stop = ["podman", "rm", "--force", "--time=0", "--filter=label=ddlbench.run=slurm-7"]
    assert every_node(stop, 4) == [
        "srun",
        "--nodes=4",
        "--ntasks=4",
        "--ntasks-per-node=1",
        "--overlap",
        "--kill-on-bad-exit=0",
        *stop,
    ]
    assert every_node(None, 4) is None  # apptainer, pyxis: nothing outlives the step


def test_the_users_config_folder_is_bound_read_only_where_every_rank_reads_it(tmp_path):
    """Every rank re-reads DDLBENCH_CONFIG (benchmarks/__main__.py): unbound, it is no folder inside the image."""
    real = tmp_path / "lustre" / "conf"
    real.mkdir(parents=True)
    (tmp_path / "conf").symlink_to(real)
    given = str(tmp_path / "conf")
    c = container.of(system("podman", "x:1"), run_root="/r", workdir="/r", environ={"DDLBENCH_CONFIG": given})
    assert f"{real}:{given}:ro" in c.binds
    assert container.environment(c, {"DDLBENCH_CONFIG": given}, record=False)["DDLBENCH_CONFIG"] == given
    assert not any("conf" in b for b in container.of(system("podman", "x:1"), run_root="/r", environ={}).binds)


def test_a_symlinked_dataset_is_mounted_at_the_path_the_ranks_open_and_a_missing_one_not_at_all(tmp_path):
    real = tmp_path / "lustre" / "imagenet"
    real.mkdir(parents=True)
    (tmp_path / "data").symlink_to(tmp_path / "lustre")
    given = str(tmp_path / "data" / "imagenet")
    c = container.of(
        system("apptainer", "/i.sif"), run_root="/r", readable=[given, str(tmp_path / "no_val")], workdir="/r"
    )
    assert f"{real}:{given}:ro" in c.binds
    assert not any("no_val" in b for b in c.binds)  # a synthetic run may inherit a data.path that is not there


def test_the_profiles_variables_win_over_the_images_for_apptainer_and_the_checkout_comes_first_on_pythonpath():
    """A host variable does not override one the image sets (apptainer's precedence): APPTAINERENV_<NAME> does."""
    c = container.of(
        system("apptainer", "/i.sif", env=["WANDB_*"]),
        run_root="/r",
        workdir="/r",
        environ={"DDLBENCH_TRACEBACK": "1", "WANDB_MODE": "offline"},
    )
    launch = {"OMP_NUM_THREADS": "1", "MASTER_ADDR": "n1", "MASTER_PORT": "29500", "PYTHONPATH": "/site:/x"}
    launch |= {"DDLBENCH_TRACEBACK": "1", "WANDB_MODE": "offline", "HOME": "/h"}
    added = container.environment(c, launch, record=False)
    assert added["PYTHONPATH"] == f"{P}:/site:/x"  # `python -m benchmarks` runs the host's code from anywhere
    assert added["APPTAINERENV_PYTHONPATH"] == f"{P}:/site:/x"
    for name in ("OMP_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT", "DDLBENCH_TRACEBACK", "WANDB_MODE"):
        assert added[f"APPTAINERENV_{name}"] == launch[name], name
    assert "APPTAINERENV_HOME" not in added
    singularity = container.environment(replace(c, runtime="singularity"), launch, record=False)
    assert singularity["SINGULARITYENV_OMP_NUM_THREADS"] == "1" and not any(
        k.startswith("APPTAINER") for k in singularity
    )
    # by default: this process's environment with the profile's system.env over it
    assert container.environment(c, record=False)["APPTAINERENV_OMP_NUM_THREADS"] == "1"
    # podman and pyxis take the values by name (-e NAME, --container-env): nothing more in the environment
    assert set(container.environment(replace(c, runtime="podman"), launch, record=False)) == {
        "PYTHONPATH",
        "PYTHONSAFEPATH",
    }


def test_pyxis_takes_names_only_so_a_prefix_is_expanded_against_the_launching_environment():
    c = container.of(
        system("pyxis", "/sq/x.sqsh", env=["WANDB_*", "HF_HOME"]),
        run_root="/r",
        workdir="/r",
        environ={"WANDB_MODE": "offline", "WANDB_DIR": "/w", "DDLBENCH_CONFIG": "/"},
    )
    (flag,) = [f for f in container.srun_flags(c) if f.startswith("--container-env=")]
    assert flag.split("=", 1)[1].split(",")[-4:] == ["DDLBENCH_CONFIG", "WANDB_DIR", "WANDB_MODE", "HF_HOME"]
    assert "*" not in flag


def test_the_ranks_run_the_checkouts_code_only_where_the_project_is_a_checkout(tmp_path, monkeypatch):
    c = container.of(system("podman", "x:1"), run_root="/r", workdir="/r", environ={})
    assert c.project == P and f"{P}:{P}:ro" in c.binds
    # installed from a wheel, PROJECT is site-packages: bound over the image's own, it would replace its torch
    (tmp_path / "benchmarks").mkdir()
    monkeypatch.setattr(container, "PROJECT", tmp_path)
    installed = container.of(system("podman", "x:1"), run_root="/r", workdir="/r", environ={})
    assert installed.project == "" and not any(str(tmp_path) in b for b in installed.binds)
    assert "PYTHONPATH" not in container.environment(installed, {}, record=False)


def test_a_local_image_file_is_given_absolute_and_a_registry_reference_as_it_is(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "ddlbench.sqsh").touch()
    image = lambda runtime, name: container.of(system(runtime, name), run_root="/r", environ={}).image  # noqa: E731
    assert image("pyxis", "ddlbench.sqsh") == str(tmp_path / "ddlbench.sqsh")  # else a registry image to pyxis
    assert image("pyxis", "sq/later.sqsh") == str(tmp_path / "sq" / "later.sqsh")
    assert image("apptainer", "~/x.sif") == str(tmp_path / "x.sif")
    assert image("apptainer", "x.sif") == str(tmp_path / "x.sif")
    assert image("pyxis", "nvcr.io#nvidia/pytorch:25.01-py3") == "nvcr.io#nvidia/pytorch:25.01-py3"
    assert image("pyxis", "ubuntu:24.04") == "ubuntu:24.04"
    assert image("apptainer", "docker://python:3.11") == "docker://python:3.11"
    assert image("podman", "localhost/ddlbench:1") == "localhost/ddlbench:1"


def test_no_read_only_mount_hides_the_run_root(tmp_path):
    """A read-only working directory between the run root and the run directory is not mounted over the run root;
    a user's read-only parent is mounted before it (every bind by depth); a user's read-only bind inside it is
    refused."""
    inner = container.of(system("podman", "x:1"), run_root="/s/runs", workdir="/s/runs/campaign", environ={})
    assert not any(b.startswith("/s/runs/campaign") for b in inner.binds) and "/s/runs:/s/runs" in inner.binds
    parent = container.of(
        system("apptainer", "/i.sif", binds=["/s:/s:ro", "/data"]), run_root="/s/runs", workdir="/w", environ={}
    )
    assert parent.binds.index("/s:/s:ro") < parent.binds.index("/s/runs:/s/runs")
    depths = [b.split(":")[1].count("/") for b in parent.binds]
    assert depths == sorted(depths), parent.binds
    assert "/data:/data" in parent.binds  # a bare path binds at itself (podman: else an empty anonymous volume)
    with pytest.raises(ConfigError, match=r"binds entry /s/runs/c:/s/runs/c:ro mounts .* inside /s/runs \(run.root\)"):
        container.of(system("podman", "x:1", binds=["/s/runs/c:/s/runs/c:ro"]), run_root="/s/runs", environ={})


def test_a_bound_path_the_bind_syntax_would_split_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"run.root=/runs/a,b holds ',', where apptainer's bind list splits"):
        container.of(system("apptainer", "/i.sif"), run_root="/runs/a,b", workdir="/w", environ={})
    with pytest.raises(ConfigError, match=r"run.root=/runs/t10:00 holds ':'"):
        container.of(system("podman", "x:1"), run_root="/runs/t10:00", workdir="/w", environ={})
    data = tmp_path / "a,b"
    data.mkdir()
    with pytest.raises(ConfigError, match=r"data.path=.*a,b holds ',', where pyxis's bind list splits"):
        container.of(system("pyxis", "/x.sqsh"), run_root="/r", readable=[data], workdir="/w", environ={})
    assert container.of(system("podman", "x:1"), run_root="/r", readable=[data], workdir="/w", environ={})


def test_the_image_definitions_install_the_makefiles_torch_pin_and_dalis_matching_wheel():
    """pyproject.toml asks torch>=2.11: an image whose own torch is older (NVIDIA's 25.01 has 2.6) would be replaced
    or refused by the project's install; both definitions install the Makefile's pin on a plain Python image."""
    import re
    from pathlib import Path

    (pin,) = re.findall(r"^TORCH_PIN \?= (.+)$", (Path(P) / "Makefile").read_text(), flags=re.M)
    for name in ("Containerfile", "ddlbench.def"):
        text = (Path(P) / "container" / name).read_text()
        assert f'TORCH_PIN="{pin}"' in text and "nvcr.io" not in text and "python:3.11" in text, name
        assert "https://download.pytorch.org/whl/${TORCH_CUDA}" in text and "dali-cuda130" in text, name
    assert (Path(P) / ".containerignore").read_text().count("\n.git\n") == 1


def test_a_read_only_bind_inside_the_scratch_names_system_local_scratch_not_run_root(tmp_path):
    """The conflict names the setting whose folder the bind lies in (issue 64: it said run.root)."""
    scratch = tmp_path / "scratch"
    with pytest.raises(ConfigError, match=r"inside .*scratch \(system\.local_scratch\), where the ranks write"):
        container.of(
            system("apptainer", "/i.sif", binds=[f"{scratch}/cache:{scratch}/cache:ro"]),
            run_root=tmp_path / "runs",
            workdir=tmp_path,
            writable={scratch: "system.local_scratch"},
        )
