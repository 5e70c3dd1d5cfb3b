"""Imports flow one way between the rooms (docs/architecture.md): the CLI (ddlbench/) on top; launch
(launchers/) and analysis below it; the run's life (launchers/lifecycle/) below launch; the engine
(benchmarks/, with run identity, records, configs and errors) at the bottom, beside the launcher programs
(launchers/programs/) that its config names and its ranks read their place from. Analysis and launch planning
import without torch; horovod, deepspeed and DALI only in their adapters."""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGES = ("ddlbench", "launchers", "analysis", "benchmarks")
# the rooms: a package, or a folder of launchers/ that is a room of its own (the longest prefix wins)
ROOMS = (
    "ddlbench",
    "analysis",
    "launchers",
    "launchers.lifecycle",
    "launchers.lifecycle.preflight",
    "launchers.programs",
    "benchmarks",
)
# room -> the rooms it may import (besides itself)
ALLOWED = {
    "ddlbench": {
        "launchers",
        "launchers.lifecycle",
        "launchers.lifecycle.preflight",
        "launchers.programs",
        "analysis",
        "benchmarks",
    },
    "launchers": {"launchers.lifecycle", "launchers.programs", "analysis", "benchmarks"},  # `stash report`: analysis
    "launchers.lifecycle": {"launchers.programs", "benchmarks"},
    # the node screen starts its probes through launch (srun, ssh, the image): the run's life's one tool on top of it
    "launchers.lifecycle.preflight": {"launchers", "launchers.lifecycle", "launchers.programs", "benchmarks"},
    "analysis": {"benchmarks"},
    # the launcher programs: argv and rank variables, on the engine's errors and Choice alone
    "launchers.programs": {"benchmarks"},  # benchmarks.errors and benchmarks.adapter_config only (VOCABULARY)
    # the engine: the launcher programs' names (its config's closed sets) and their rank variables (distenv)
    "benchmarks": {"launchers.programs"},
}
# the vocabulary every room may use (errors, closed sets): modules that import nothing of the project but each
# other, so an edge to them closes no circle
VOCABULARY = {"benchmarks.errors", "benchmarks.adapter_config"}


def in_vocabulary(name: str) -> bool:
    """A vocabulary module, or a name imported from one (`from benchmarks.errors import ConfigError`)."""
    return name in VOCABULARY or name.rpartition(".")[0] in VOCABULARY


# the engine's programs (python -m benchmarks, python -m benchmarks.commbench) compose it with the run's life:
# a rank's entry may import what starts, watches and ends it; no module of the engine's library may
PROGRAMS = {"benchmarks/__main__.py", "benchmarks/commbench/__main__.py"}
PROGRAMS_MAY_IMPORT = {"launchers", "launchers.lifecycle"}


def room_of(module: str) -> str | None:
    """The room a dotted module name (or a file's path) belongs to, None outside the project."""
    dotted = module.removesuffix(".py").replace("/", ".")
    rooms = [r for r in ROOMS if dotted == r or dotted.startswith(f"{r}.")]
    return max(rooms, key=len) if rooms else None


# third-party libraries that only their adapter module imports
ADAPTER_OF = {
    "horovod": "benchmarks/frameworks/horovod.py",
    "deepspeed": "benchmarks/frameworks/deepspeed.py",
    "nvidia.dali": "benchmarks/loaders/dali.py",
    "nvidia.nvimgcodec": "benchmarks/loaders/gpu_decode.py",
    "mpi4py": "benchmarks/commbench/mpi.py",
    "transformers": "benchmarks/models/bert.py",
}
# benchmarks/ in three layers: the torch-free core (run identity and record formats, errors, config schema and
# composition, each adapter's config, the launchers, the collective protocol), the rank runtime and its
# adapters (everything else), and the tools that drive the runtime from outside a training run
CORE = {
    "benchmarks.adapter_config",
    "benchmarks.collective",
    "benchmarks.config",
    "benchmarks.config_groups",
    "benchmarks.data.coldcache",
    "benchmarks.errors",
    "benchmarks.flops",
    "benchmarks.frameworks.configs",
    "benchmarks.gradients",
    "benchmarks.loaders.configs",
    "benchmarks.models.configs",
    "benchmarks.optim_configs",
    "benchmarks.peaks",
    "benchmarks.resources",
    "benchmarks.rundir",
    "benchmarks.rundir.cell_identity",
    "benchmarks.rundir.run_files",
    "benchmarks.rundir.summary_schema",
    "benchmarks.schema",
    "benchmarks.tracereduce",
}
TOOLS = ("benchmarks.commbench", "benchmarks.loaderbench", "benchmarks.maxbatch")
TORCH_FREE = [
    *sorted(CORE),
    "launchers.programs",
    "launchers.programs.base",
    "launchers.lifecycle.liveness",
    "launchers.lifecycle.staging",
    "launchers.lifecycle.rundir_state",
    "launchers.lifecycle.doctor",
    "benchmarks.validate",
    "launchers.campaign",
    "launchers.slurm",
    "launchers.local",
    "launchers.stash",
    "launchers.stash_config",
    "analysis.load",
    "analysis.cells",
    "analysis.campaign_analysis",
    "analysis.results",
    "analysis.report",
    "analysis.report_render",
    "analysis.figures",
    "analysis.stash",
    "analysis.breakdown",
    "ddlbench.reports",
    "benchmarks.commbench",
    "launchers.commbench",
    "benchmarks.distenv",
    "launchers.lifecycle.preflight",
    "launchers.lifecycle.preflight",
    "ddlbench.preflight",
]


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at its top or inside a function (absolute names; a `from m import x` adds
    m and m.x, which is a module where x is one)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)  # and what it names, which may be a module: from benchmarks import tasks
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@functools.cache
def _sources() -> dict[str, set[str]]:
    """Every project file's imports, parsed once per test process (read-only to the tests)."""
    return {
        path.relative_to(REPO).as_posix(): _imports(path)
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
    }


def test_rooms_import_one_way():
    wrong = []
    for file, imported in _sources().items():
        room = room_of(file)
        allowed = ALLOWED[room] | (PROGRAMS_MAY_IMPORT if file in PROGRAMS else set())
        for name in imported:
            target = room_of(name)
            if target is not None and target != room and target not in allowed:
                wrong.append(f"{file} imports {name} ({room} -> {target})")
            elif room == "launchers.programs" and target == "benchmarks" and name != "benchmarks":
                if not in_vocabulary(name):
                    wrong.append(f"{file} imports {name} (the launcher programs use the engine's vocabulary only)")
    assert not wrong, "\n".join(wrong)


def test_the_vocabulary_imports_nothing_else():
    for module in VOCABULARY:
        imported = {n for n in _sources()[f"{module.replace('.', '/')}.py"] if room_of(n) and n != "benchmarks"}
        assert all(in_vocabulary(n) for n in imported), f"{module} imports {sorted(imported)}"


def test_the_room_graph_has_no_cycle():
    edges = {r: set() for r in ROOMS}
    for file, names in _sources().items():
        if file in PROGRAMS:  # a program composes the rooms; it is no room's module
            continue
        edges[room_of(file)].update(
            t for n in names if not in_vocabulary(n) and (t := room_of(n)) not in (None, room_of(file))
        )
    visiting, done = set(), set()

    def visit(r: str, path: list[str]) -> None:
        assert r not in visiting, f"import cycle: {' -> '.join([*path, r])}"
        if r in done:
            return
        visiting.add(r)
        for q in edges[r]:
            visit(q, [*path, r])
        visiting.discard(r)
        done.add(r)

    for r in ROOMS:
        visit(r, [])


@pytest.mark.parametrize("library", sorted(ADAPTER_OF))
def test_a_framework_library_is_imported_by_its_adapter_only(library):
    importers = sorted(
        f for f, names in _sources().items() if any(n == library or n.startswith(f"{library}.") for n in names)
    )
    assert importers == [ADAPTER_OF[library]]


def test_analysis_and_launch_planning_import_without_torch():
    code = (
        f"import importlib, sys\nfor m in {TORCH_FREE!r}: importlib.import_module(m)\n"
        "from launchers.campaign import plan\nplan(['experiment=aach2023_scaling', 'system=juwels_booster'])\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    )
    env = {**os.environ, "DDLBENCH_IMAGENET": str(REPO)}  # the grid's data path: any folder
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]", result.stdout


def _benchmarks_part(module: str) -> str | None:
    """benchmarks.x.y -> benchmarks.x (a subpackage or a top-level module of benchmarks/); None outside it."""
    parts = module.split(".")
    if parts[0] != "benchmarks" or len(parts) < 2:
        return None
    part = REPO / "benchmarks" / parts[1]
    return f"benchmarks.{parts[1]}" if part.is_dir() or part.with_suffix(".py").exists() else None


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return sorted(circles)


def test_benchmarks_parts_import_without_a_circle():
    """Inside benchmarks/, its subpackages and top-level modules as nodes, every import an edge (those only
    for type checking too): no strongly connected group of more than one node. (The last circle, through
    commbench's Collective, went when the protocol moved to benchmarks/collective.py.)"""
    edges: dict[str, set[str]] = {}
    for file, names in _sources().items():
        module = file.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        source = _benchmarks_part(module)
        if source is None:
            continue
        targets = {_benchmarks_part(n) for n in names}
        edges.setdefault(source, set()).update(t for t in targets if t and t != source)
    circles = _circles(edges)
    assert not circles, f"benchmarks/ parts that import each other in a circle: {circles}"


def _runtime_imports(path: Path) -> set[str]:
    """_imports without those under `if TYPE_CHECKING:` (names for annotations only, never run); `from m import
    x` names m.x only, which the caller reads as the module m.x where x is one, else as m."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            node.body = []
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("package", ["analysis", "ddlbench", "launchers"])
def test_the_modules_of_a_package_import_without_a_circle(package):
    """Inside analysis/, ddlbench/ and launchers/, module by module, imports at run time: no circle. (An
    analysis module names the facade it is handed, CampaignAnalysis, for type checking only: the facade
    imports the analyses' metrics.)"""
    modules = {
        path.relative_to(REPO).as_posix().removesuffix(".py").removesuffix("/__init__").replace("/", "."): path
        for path in sorted((REPO / package).rglob("*.py"))
    }
    edges: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = {n if n in modules else n.rpartition(".")[0] for n in _runtime_imports(path)}
        edges[module] = {t for t in targets if t in modules and t != module}
    circles = _circles(edges)
    assert not circles, f"{package}/ modules that import each other in a circle: {circles}"


def _top_level_imports(path: Path) -> set[str]:
    """The modules a file imports when it is imported: its top level (in `try`/`if` blocks too, but not under
    `if TYPE_CHECKING:`), not inside functions; `from m import x` names m.x."""
    names = set()
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        inner = (
            [*node.body, *node.orelse, *getattr(node, "finalbody", [])] if isinstance(node, (ast.If, ast.Try)) else []
        )
        for statement in [node, *inner, *(s for h in getattr(node, "handlers", []) for s in h.body)]:
            if isinstance(statement, ast.Import):
                names.update(alias.name for alias in statement.names)
            elif isinstance(statement, ast.ImportFrom) and statement.module and statement.level == 0:
                names.update(f"{statement.module}.{alias.name}" for alias in statement.names)
    return names


def test_benchmarks_layers_import_downwards():
    """The core imports (when imported) only the core; nothing in the runtime imports a tool. With
    test_analysis_and_launch_planning_import_without_torch (every core module imports without torch) this is
    the layering of docs/architecture.md."""
    modules = {
        p.relative_to(REPO).as_posix().removesuffix(".py").removesuffix("/__init__").replace("/", "."): p
        for p in sorted((REPO / "benchmarks").rglob("*.py"))
    }

    def resolved(names: set[str]) -> set[str]:
        return {n if n in modules else n.rpartition(".")[0] for n in names} & set(modules)

    def is_tool(module: str) -> bool:
        return any(module == t or module.startswith(f"{t}.") for t in TOOLS)

    core_out = {
        f"{m} imports {d}"
        for m in sorted(CORE)
        for d in resolved(_top_level_imports(modules[m]))
        if d not in CORE and d != "benchmarks" and not d.startswith("launchers.programs.")
    }
    assert not core_out, f"the core imports the runtime: {sorted(core_out)}"
    up = {
        f"{m} imports {d}"
        for m, path in modules.items()
        if not is_tool(m)
        for d in resolved(_imports(path))
        if is_tool(d)
    }
    assert not up, f"the runtime imports a tool: {sorted(up)}"
