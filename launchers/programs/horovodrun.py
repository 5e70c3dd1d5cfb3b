"""horovodrun (horovod.runner.launch) with Gloo: Horovod's own launcher; across hosts it runs once, on the
first host, and starts the others' ranks over ssh."""

from __future__ import annotations

from collections.abc import Mapping

from launchers.programs.base import LOCAL, JobShape, Launcher, Probe, RankProgram, RankVariables, integer


class Horovodrun(Launcher):
    name = "horovodrun"
    scopes = frozenset({LOCAL})
    order = 1
    probe = Probe("module", "horovod", "pip install -e '.[horovod]' (make horovod builds it)")

    def one_host(self, shape: JobShape, program: RankProgram) -> list[str]:
        # `horovodrun` is not installed by pip --target; the module is the same launcher
        return self._argv(shape, program, f"localhost:{shape.nproc}")

    def several_hosts(self, shape: JobShape, program: RankProgram) -> list[str]:
        """-H host:slots for every host; Gloo, as on one machine; the run's interfaces, where it names them."""
        interfaces = ["--network-interfaces", ",".join(shape.interfaces)] if shape.interfaces else []
        slots = ",".join(f"{host}:{shape.ranks_per_node}" for host in shape.hosts)
        return self._argv(shape, program, slots, interfaces)

    @staticmethod
    def _argv(shape: JobShape, program: RankProgram, slots: str, interfaces: list[str] | None = None) -> list[str]:
        return [
            program.python,
            "-m",
            "horovod.runner.launch",
            "-np",
            str(shape.nproc),
            "-H",
            slots,
            *(interfaces or []),
            "--gloo",
            *program.argv(),
        ]

    def rank_variables(self, environ: Mapping[str, str]) -> RankVariables | None:
        # horovodrun --gloo sets only HOROVOD_* (its mpirun mode sets OpenMPI's as well: these come first)
        if "HOROVOD_RANK" not in environ or "HOROVOD_SIZE" not in environ:
            return None
        world = integer(environ, "HOROVOD_SIZE")
        return RankVariables(
            rank=integer(environ, "HOROVOD_RANK"),
            local_rank=int(environ.get("HOROVOD_LOCAL_RANK", 0)),
            world_size=world,
            local_world_size=int(environ.get("HOROVOD_LOCAL_SIZE", world)),
            num_nodes=int(environ.get("HOROVOD_CROSS_SIZE", 1)),
            source="horovodrun",
        )


LAUNCHER = Horovodrun()
