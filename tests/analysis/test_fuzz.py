"""No input crashes the analysis (issue "Every number belongs to exactly one configuration", item 7).

A small valid campaign, written as the app writes it (launchers/lifecycle/rank.py, loop.py, benchmarks/rundir/,
telemetry.py, commbench), gets one or two of its files corrupted: fuzzed bytes, a truncation, a
fuzzed JSON value at any key of any document or log line, a fuzzed YAML setting. Then:
- load_campaign never raises, with pyarrow and without (the line-by-line fallback), and both read
  the same runs, steps and problems;
- every run directory is one row of `runs`; a run that does not count says why, in one line;
- a completed run has a rank log with a measured step for every rank, and steps of STEP_FIELDS'
  types (no null in the required fields, finite seconds >= 0, integer counts >= 0);
- build_report and `ddlbench results` run to the end on what load_campaign gives.
"""

from __future__ import annotations

import copy
import json
import math
import tempfile
import warnings
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from analysis import load
from analysis.load import LogWarning, load_campaign, ranklogs, records
from benchmarks.rundir import cell_identity, run_files, summary_schema

pytestmark = pytest.mark.filterwarnings("ignore::analysis.load.LogWarning")

# the example count is the profile's (tests/conftest.py: 40 in `make test`, 10 in `make test-fast`)
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
STATUSES = {"completed", "failed", "interrupted", "incomplete", "corrupt", "unsupported"}
NAME_COLUMNS = ("framework", "loader", "model", "precision")
WARMUP, STEPS = 2, 6


# --- a valid campaign, as the app writes it ------------------------------------------------------


def _settings(framework: str, loader: str, *, repeat: int = 0) -> dict:
    """A resolved config (what config.yaml holds), trimmed to the keys analysis reads and a few more."""
    return {
        "framework": {"name": framework, "comm_timer": "auto"},
        "loader": {"name": loader, "workers": 2},
        "model": {"arch": "resnet", "depth": 50, "num_classes": 100, "compile": False},
        "precision": {"name": "amp_bf16", "channels_last": True},
        "system": {"name": "local_cpu", "device": "cpu", "ranks_per_node": 2, "cpu_bind": "none"},
        "data": {"path": "/data/synth", "cache": "warm"},
        "optim": {"lr": 0.1},
        "run": {
            "campaign": "fuzz",
            "repeat": repeat,
            "per_gpu_batch": 4,
            "warmup_steps": WARMUP,
            "steps": STEPS - WARMUP,
            "epochs": None,
            "seed": 0,
            "log_every": 0,
            "telemetry_hz": 0,
            "profile_steps": [3, 3],
            "root": "runs",
            "dir": None,
        },
    }


def _step_line(step: int, rank: int) -> dict:
    return {
        "step": step,
        "epoch": step // 4,
        "step_in_epoch": step % 4,
        "samples": 4,
        "warmup": step < WARMUP,
        "profiled": step == 3,
        "host_data_s": 0.001,
        "host_step_s": 0.02,
        "comm_s": 0.004 + 0.001 * rank,
        "comm_exposed_s": 0.001,
        "data_s": 0.002,
        "fwd_s": 0.01,
        "bwd_s": 0.02,
        "opt_s": 0.003,
        "step_s": 0.04 + 0.002 * rank + 0.001 * step,
    }


def write_run(root: Path, framework: str, loader: str, *, world: int, repeat: int = 0, telemetry: bool = False) -> Path:
    """One completed run directory: config.yaml, meta.json, rank<R>.jsonl (header + steps), summary.json."""
    cfg = _settings(framework, loader, repeat=repeat)
    run_dir = root / "fuzz" / cell_identity.dir_name(cfg, world_size=world, num_nodes=1, repeat=repeat)
    run_dir.mkdir(parents=True)
    (run_dir / run_files.CONFIG).write_text(yaml.safe_dump(cfg, sort_keys=False))
    run_files.write_json_atomic(
        run_dir / run_files.META,
        {
            "schema_version": 1,
            "started": "2026-11-29T10:00:00+0000",
            "argv": ["ddlbench", "run"],
            "launcher": "torchrun",
            "world_size": world,
            "num_nodes": 1,
            "git_sha": "0" * 40,
            "git_dirty": False,
            "versions": {"torch": "2.14.1"},
            "hardware": {"host": "vm", "gpus": [], "cpu_count": 2},
            "env": {"OMP_NUM_THREADS": "1"},
            "cell_hash": cell_identity.cell_hash(cfg, world_size=world, num_nodes=1),
        },
    )
    for rank in range(world):
        header = {
            "kind": "header",
            "schema_version": 1,
            "rank": rank,
            "local_rank": rank,
            "host": "vm",
            "device": "cpu",
            "pid": 100 + rank,
            "cpus": "0-1",
            "steps_per_epoch": 4,
        }
        lines = [header, *(_step_line(step, rank) for step in range(STEPS))]
        (run_dir / f"rank{rank}.jsonl").write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in lines))
        if telemetry:
            samples = [
                {
                    "t_s": 1_763_632_800.0 + 0.1 * i,
                    "rank": rank,
                    "host": "vm",
                    "cpu_percent": 50.0 + i,
                    "proc_cpu_percent": 90.0,
                    "rss_bytes": 10**9 + i,
                    "disk_read_bytes_s": 0.0,
                }
                for i in range(5)
            ]
            (run_dir / f"telemetry_rank{rank}.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
            # and the trace window's breakdown (benchmarks/profiling.py reduce_trace), of profiled step 3
            run_files.write_json_atomic(
                run_dir / f"breakdown_rank{rank}.json",
                {
                    "schema_version": 1,
                    "rank": rank,
                    "source": "profile_steps",
                    "window_steps": [3, 3],
                    "reduce_s": 0.1,
                    "raw_trace": None,
                    "trace": {
                        "window_s": 0.04,
                        "compute_s": 0.03,
                        "memcpy_s": 0.001,
                        "comm_total_s": 0.004,
                        "comm_overlap_s": 0.003,
                        "comm_exposed_s": 0.001,
                        "idle_s": 0.008,
                        "steps": [3],
                        "conv_s": 0.02,
                        "gemm_s": 0.005,
                        "other_compute_s": 0.005,
                        "h2d_s": 0.001,
                        "collectives_s": {"allreduce": 0.004},
                        "collectives_exposed_s": {"allreduce": 0.001},
                    },
                },
            )
    key = cell_identity.identity(cfg, world_size=world, num_nodes=1)
    summary = summary_schema.completed_summary(
        key=key,
        measured=summary_schema.throughput_of_run(run_dir, world_size=world),
        wall_s=0.2,
        last_loss=4.6,
        runtime_s=3.0,
        warmup_steps=WARMUP,
        repeat=repeat,
        names={
            "framework": framework,
            "loader": loader,
            "model": "resnet50",
            "precision": "amp_bf16",
            "per_gpu_batch": 4,
            "campaign": "fuzz",
        },
    )
    run_files.write_json_atomic(run_dir / run_files.SUMMARY, summary)
    return run_dir


def write_campaign(root: Path) -> list[Path]:
    """Three completed runs (1 and 2 ranks of one curve, a repeat), telemetry, and a commbench file."""
    dirs = [
        write_run(root, "ddp", "native", world=1),
        write_run(root, "ddp", "native", world=2, telemetry=True),
        write_run(root, "ddp", "native", world=2, repeat=1),
    ]
    bench = [
        {
            "op": "all_reduce",
            "backend": "gloo",
            "world_size": 2,
            "size_bytes": 2**k,
            "time_s": 1e-5 * k,
            "algbw_gb_s": 0.1 * k,
            "busbw_gb_s": 0.1 * k,
            "host": "vm",
        }
        for k in (10, 12, 14)
    ]
    run_files.write_json_atomic(root / "fuzz" / "commbench.json", bench)
    return dirs


def campaign_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


# --- fuzzed values and edits -------------------------------------------------------------------

SPECIAL_NUMBERS = st.sampled_from(
    [
        -1,
        0,
        2**31,
        2**63 - 1,
        2**63,
        2**64,
        -(2**63) - 1,
        10**30,
        -0.0,
        1e308,
        1e-320,
        math.nan,
        math.inf,
        -math.inf,
        0.5,
        1.0,
        True,
        False,
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    SPECIAL_NUMBERS,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", "1", "completed", "failed", "ddp", "\ud800", "NaN"]),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _dump_json(obj) -> bytes:
    """JSON as Python writes it: NaN/Infinity literals, lone surrogates escaped."""
    return json.dumps(obj).encode()


def _keys(obj, prefix=()) -> list[tuple]:
    """Every key path of a JSON/YAML document (the document itself is ())."""
    paths = [prefix]
    if isinstance(obj, dict):
        for key, value in obj.items():
            paths += _keys(value, (*prefix, key))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            paths += _keys(value, (*prefix, index))
    return paths


def _get(obj, path: tuple):
    for part in path:
        obj = obj[part]
    return obj


def _set(obj, path: tuple, value, *, delete: bool = False):
    """obj with the value at path replaced (or deleted; a new key when path ends in one that is not there)."""
    if not path:
        return value
    obj = copy.deepcopy(obj)
    parent = obj
    for part in path[:-1]:
        parent = parent[part]
    if delete and isinstance(parent, dict):
        parent.pop(path[-1], None)
    elif delete and isinstance(parent, list):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return obj


@st.composite
def byte_edit(draw, data: bytes) -> bytes:
    """Fuzzed bytes: replaced, truncated, inserted, overwritten, deleted or duplicated."""
    kind = draw(st.sampled_from(["replace", "truncate", "insert", "overwrite", "delete", "duplicate", "empty"]))
    at = draw(st.integers(0, len(data)))
    if kind == "replace":
        return draw(st.binary(max_size=200))
    if kind == "truncate":
        return data[:at]
    if kind == "empty":
        return b""
    junk = draw(
        st.binary(min_size=1, max_size=20)
        | st.sampled_from(
            [b"\n", b"\r\n", b"\x00", b"\xff\xfe", b"\xef\xbb\xbf", b"NaN", b"}{", b"\n\n", b"[" * 40, b",", b'"']
        )
    )
    if kind == "insert":
        return data[:at] + junk + data[at:]
    if kind == "overwrite":
        return data[:at] + junk + data[at + len(junk) :]
    end = draw(st.integers(at, min(len(data), at + 300)))
    return data[:at] + data[end:] if kind == "delete" else data[:end] + data[at:end] + data[end:]


@st.composite
def document_edit(draw, path: Path, data: bytes) -> bytes:
    """A fuzzed value (or a deleted key) at any key of a JSON document, one line of a JSON-lines log,
    or a setting of config.yaml."""
    delete = draw(st.booleans()) and draw(st.booleans())
    value = draw(JSON_VALUES)
    if path.suffix == ".yaml":
        cfg = yaml.safe_load(data)
        where = draw(st.sampled_from(_keys(cfg)))
        # sometimes a key that is not there yet (of a mapping: a list has no named keys)
        if not delete and not draw(st.integers(0, 3)) and where and isinstance(_get(cfg, where[:-1]), dict):
            where = (*where[:-1], draw(st.text(max_size=6)))
        try:
            return yaml.safe_dump(_set(cfg, where, value, delete=delete), allow_unicode=False).encode()
        except (yaml.YAMLError, UnicodeEncodeError):  # a value YAML cannot write: write it as JSON (also YAML)
            return _dump_json(value)
    if path.suffix == ".jsonl":
        lines = data.decode().splitlines(keepends=True)
        if not lines:  # an empty log (a run that stopped before its first line): its one line is the value
            return _dump_json(value) + b"\n"
        index = draw(st.integers(0, len(lines) - 1))
        record = json.loads(lines[index])
        where = draw(st.sampled_from(_keys(record)))
        lines[index] = json.dumps(_set(record, where, value, delete=delete)) + "\n"
        return "".join(lines).encode()
    doc = json.loads(data)
    where = draw(st.sampled_from(_keys(doc)))
    return _dump_json(_set(doc, where, value, delete=delete))


@st.composite
def corrupted_campaign(draw, *, kinds=("bytes", "document")) -> dict[str, bytes]:
    """{relative path: new content} for one or two files of the campaign."""
    with tempfile.TemporaryDirectory() as tmp:
        write_campaign(Path(tmp))
        files = {p.relative_to(tmp).as_posix(): p.read_bytes() for p in campaign_files(Path(tmp))}
    edits: dict[str, bytes] = {}
    for _ in range(draw(st.integers(1, 2))):
        name = draw(st.sampled_from(sorted(files)))
        data = edits.get(name, files[name])
        kind = draw(st.sampled_from(kinds))
        if kind == "document":
            try:
                edits[name] = draw(document_edit(Path(name), data))
                continue
            except (ValueError, yaml.YAMLError):  # the first edit broke the document already
                pass
        edits[name] = draw(byte_edit(data))
    return edits


def apply(root: Path, edits: dict[str, bytes]) -> list[Path]:
    dirs = write_campaign(root)
    for name, data in edits.items():
        (root / name).write_bytes(data)
    return dirs


# --- the invariants ------------------------------------------------------------------------------


def load_quietly(root: Path, *, arrow: bool = True) -> load.Campaign:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any other warning (pandas, numpy) is a bug here
        warnings.simplefilter("ignore", LogWarning)
        if arrow:
            return load_campaign(root)
        with mock.patch.object(ranklogs, "HAVE_ARROW", False):
            return load_campaign(root)


def check_campaign(campaign: load.Campaign, run_dirs: list[Path]) -> None:
    runs = campaign.runs
    assert sorted(runs["run_dir"]) == sorted(map(str, run_dirs)), "every run directory is one row"
    assert runs["run_id"].is_unique
    assert set(runs["status"]) <= STATUSES
    for _, run in runs[runs["status"] != "completed"].iterrows():
        assert isinstance(run["reason"], str) and run["reason"].strip() and "\n" not in run["reason"], run.to_dict()
    for column in load.INT_COLUMNS:
        if column in runs:
            assert str(runs[column].dtype) == "Int64", column
    counted = campaign.counted
    for column in ("world_size", "num_nodes", "per_gpu_batch"):
        assert counted[column].notna().all() and (counted[column] >= 1).all(), column
    for column in NAME_COLUMNS:
        assert counted[column].map(lambda v: isinstance(v, str) and v != "").all(), column
    assert counted["cell_hash"].notna().all()
    check_steps(campaign.steps, counted)
    problems = campaign.problems
    assert list(problems.columns) == ["run_id", "file", "line", "problem"]
    assert problems["problem"].map(lambda p: isinstance(p, str) and p and "\n" not in p).all()
    check_telemetry_and_commbench(campaign)


def check_steps(steps: pd.DataFrame, counted: pd.DataFrame) -> None:
    for name, dtype in run_files.STEP_FIELDS.items():
        kind = steps[name].dtype
        if dtype == "int64":
            assert pd.api.types.is_integer_dtype(kind), (name, kind)
        elif dtype == "bool":
            assert pd.api.types.is_bool_dtype(kind), (name, kind)
        else:
            assert kind == "float64", (name, kind)
    for name in run_files.REQUIRED_STEP_FIELDS:
        assert steps[name].notna().all(), name
    for name, dtype in run_files.STEP_FIELDS.items():
        if dtype != "bool":
            values = steps[name].dropna().astype("float64")
            assert np.isfinite(values).all() and (values >= 0).all(), name
    assert set(steps["run_id"].astype(str)) <= set(counted["run_id"]), "steps only of counted runs"
    assert not steps.duplicated(["run_id", "rank", "step"]).any()
    measured = steps[~steps["warmup"] & ~steps["profiled"]]
    for _, run in counted.iterrows():
        ranks = set(measured.loc[measured["run_id"] == run["run_id"], "rank"])
        assert ranks == set(range(int(run["world_size"]))), (run["run_id"], ranks)


def check_telemetry_and_commbench(campaign: load.Campaign) -> None:
    traces = campaign.traces
    assert list(traces.columns) == records.TRACE_COLUMNS
    if not traces.empty:
        assert set(traces["run_id"]) <= set(campaign.counted["run_id"]), "traces only of counted runs"
        seconds = traces[[*records.TRACE_SECONDS, "allreduce_s", "allreduce_exposed_s"]].astype("float64")
        assert np.isfinite(seconds).all().all() and (seconds >= 0).all().all() and (traces["window_s"] > 0).all()
    telemetry = campaign.telemetry
    if not telemetry.empty:
        assert np.isfinite(telemetry["t_s"].astype("float64")).all()
        assert set(telemetry["run_id"]) <= set(campaign.runs["run_id"])
    bench = campaign.commbench
    if not bench.empty:
        assert bench[records.COMMBENCH_FIELDS].notna().all().all()
        assert (bench["size_bytes"] >= 1).all() and np.isfinite(bench["busbw_gb_s"].astype("float64")).all()
        assert bench["op"].map(lambda v: isinstance(v, str)).all()


def same_reading(fast: load.Campaign, slow: load.Campaign) -> None:
    """pyarrow's reader and the line-by-line one give the same tables."""
    key = ["run_id", "status", "reason"]
    pd.testing.assert_frame_equal(
        fast.runs[key].sort_values("run_id").reset_index(drop=True),
        slow.runs[key].sort_values("run_id").reset_index(drop=True),
    )
    order = ["run_id", "rank", "step"]
    a, b = (
        s.assign(run_id=s["run_id"].astype(str)).sort_values(order).reset_index(drop=True)
        for s in (fast.steps, slow.steps)
    )
    pd.testing.assert_frame_equal(a, b, check_dtype=False, check_exact=False, rtol=1e-12)
    order = ["run_id", "file", "line", "problem"]
    a, b = (p.astype(str).sort_values(order).reset_index(drop=True) for p in (fast.problems, slow.problems))
    pd.testing.assert_frame_equal(a, b)


# --- the tests -----------------------------------------------------------------------------------


def test_the_valid_campaign_counts_every_run(tmp_path):
    run_dirs = write_campaign(tmp_path)
    campaign = load_quietly(tmp_path)
    check_campaign(campaign, run_dirs)
    assert set(campaign.runs["status"]) == {"completed"} and campaign.problems.empty
    assert len(campaign.steps) == STEPS * (1 + 2 + 2) and len(campaign.telemetry) == 10 and len(campaign.traces) == 2
    same_reading(campaign, load_quietly(tmp_path, arrow=False))


def check_both_readers(edits: dict[str, bytes]) -> None:
    """The corrupted campaign loads with pyarrow and without, each well formed, both alike."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dirs = apply(Path(tmp), edits)
        fast = load_quietly(Path(tmp))
        check_campaign(fast, run_dirs)
        slow = load_quietly(Path(tmp), arrow=False)
        check_campaign(slow, run_dirs)
        same_reading(fast, slow)


@FUZZ
@given(edits=corrupted_campaign(kinds=("bytes",)))
def test_fuzzed_bytes_never_crash_loading(edits):
    check_both_readers(edits)


@FUZZ
@given(edits=corrupted_campaign(kinds=("document",)))
@example(
    edits={
        "fuzz/ddp-native-resnet50-amp_bf16-g2-n1-b4-d1d09aef-r0/summary.json": b'{"campaign": "fuzz", "cell_hash": "d1d09aef", "finished": "2026-12-05T01:53:06+0000", "framework": "ddp", "global_batch": 8, "last_loss": 4.6, "loader": "native", "measured_samples": 24, "measured_steps": 3, "model": "resnet50", "num_nodes": 1, "num_processes": 2, "peak_allocated_bytes": null, "peak_allocated_bytes_by_rank": null, "peak_reserved_bytes": null, "peak_reserved_bytes_by_rank": null, "per_gpu_batch": 4, "per_gpu_img_s": 87.5912408759124, "precision": "amp_bf16", "repeat": 0, "runtime_s": 3.0, "schema_version": 1, "status": [], "throughput_img_s": 175.1824817518248, "time_s": 0.137, "wall_s": 0.2, "warmup_steps": 2, "world_size": 2}'
    },
).via("discovered failure")
def test_fuzzed_values_never_crash_loading(edits):
    check_both_readers(edits)


# a report per example: half the profile's count
@pytest.mark.slow
@settings(max_examples=settings.default.max_examples // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=corrupted_campaign())
def test_report_and_results_never_crash(edits):
    """Slow (35 s alone, 92 s beside the other worker on the CI machine): a whole report for each of its 20
    examples; make test-fast leaves it to make test and fuzzes the loading (test_fuzzed_values_never_crash_loading)."""
    from analysis.report import build_report
    from analysis.results import format_results, results_table

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root = Path(tmp) / "runs"
        apply(root, edits)
        build_report(root, Path(tmp) / "report", formats=("png",), jobs=1)
        assert (Path(tmp) / "report" / "report.html").read_text(encoding="utf-8")
        table, excluded = results_table(root)
        format_results(table, excluded)
        if ranklogs.HAVE_ARROW:
            load.export_parquet(load_campaign(root), Path(tmp) / "parquet")


def test_dollar_signs_in_a_setting_are_drawn_as_text(tmp_path):
    """Found by the fuzzer: a setting whose key and value hold "$" pairs reaches the figures' labels, where
    matplotlib read them as mathtext and failed; they are text (palette.PAPER_RC: text.parse_math off)."""
    from analysis.report import build_report

    run_dirs = write_campaign(tmp_path / "runs")
    config = run_dirs[1] / "config.yaml"
    settings = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**settings, "optim": {**settings.get("optim", {}), "x$_$": "a$^{$"}}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_report(tmp_path / "runs", tmp_path / "report", formats=("png",), jobs=1)
    assert (tmp_path / "report" / "report.html").read_text(encoding="utf-8")


# --- inputs a fuzzer finds rarely, each once ----------------------------------------------------


def _edit_json(name: str, change):
    def edit(root: Path, run_dirs: list[Path]) -> None:
        path = run_dirs[1] / name
        path.write_text(json.dumps(change(json.loads(path.read_text()))))

    return edit


def _edit_line(rank: int, index: int, change):
    def edit(root: Path, run_dirs: list[Path]) -> None:
        path = run_dirs[1] / f"rank{rank}.jsonl"
        lines = path.read_text().splitlines()
        lines[index] = change(lines[index])
        path.write_text("\n".join(lines) + "\n")

    return edit


def _write(name: str, data: bytes):
    def edit(root: Path, run_dirs: list[Path]) -> None:
        (run_dirs[1] / name).write_bytes(data)

    return edit


def _step(**fields):
    return _edit_line(1, 4, lambda line: json.dumps({**json.loads(line), **fields}, allow_nan=True))


DEEP = b"[" * 5000 + b"]" * 5000
RARE = {  # name -> (edit of the 2-rank run, its status afterwards, words in its reason or in a problem)
    "deep JSON in meta.json": (_write("meta.json", DEEP), "corrupt", "nested too deeply"),
    "deep JSON in a step line": (_edit_line(0, 3, lambda _: DEEP.decode()), "completed", "nested too deeply"),
    "a 5000-digit integer in summary.json": (
        _write("summary.json", b'{"status": "completed", "world_size": ' + b"9" * 5000 + b"}"),
        "corrupt",
        "unreadable summary.json",
    ),
    "a YAML alias cycle in config.yaml": (_write("config.yaml", b"a: &x [*x]\n"), "corrupt", "nested over 32 levels"),
    "YAML aliases that multiply": (
        _write(
            "config.yaml",
            b"a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, "
            b"*a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, "
            b"*b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
            b"e: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
        ),
        "corrupt",
        "holds over 100,000 values",
    ),
    "a YAML date key": (
        _write("config.yaml", b"2026-01-01: [{2026-01-02: 1}]\n"),
        "corrupt",
        "holds settings no run writes",
    ),
    "a bad YAML date": (_write("config.yaml", b"a: 2026-13-45\n"), "corrupt", "unreadable config.yaml"),
    "config.yaml a list": (_write("config.yaml", b"- 1\n"), "corrupt", "expected a mapping"),
    "per_gpu_batch .inf": (
        _write("config.yaml", b"framework: {name: ddp}\nrun: {per_gpu_batch: .inf}\n"),
        "corrupt",
        "run.per_gpu_batch inf is not an integer >= 1",
    ),
    "schema_version a list": (
        _edit_json("summary.json", lambda s: {**s, "schema_version": [1]}),
        "unsupported",
        "schema_version [1]",
    ),
    "schema_version true": (
        _edit_json("meta.json", lambda s: {**s, "schema_version": True}),
        "unsupported",
        "schema_version True",
    ),
    "header schema_version an object": (
        _edit_line(0, 0, lambda line: json.dumps({**json.loads(line), "schema_version": {}})),
        "unsupported",
        "schema_version {}",
    ),
    "summary run_id": (
        _edit_json("summary.json", lambda s: {**s, "run_id": "elsewhere", "reason": 5}),
        "completed",
        "would overwrite the runs table's own column",
    ),
    "summary world_size text": (
        _edit_json("summary.json", lambda s: {**s, "world_size": "2"}),
        "completed",
        "world_size '2' is not an integer >= 1; ignored",
    ),
    "summary world_size other": (
        _edit_json("summary.json", lambda s: {**s, "world_size": 3}),
        "corrupt",
        "summary.json world_size 3 but meta.json 2",
    ),
    "summary framework other": (
        _edit_json("summary.json", lambda s: {**s, "framework": "horovod"}),
        "completed",
        "framework 'horovod' differs from config.yaml's 'ddp'",
    ),
    "meta world_size a bool": (
        _edit_json("meta.json", lambda s: {**s, "world_size": True}),
        "corrupt",
        "world_size True is not an integer >= 1",
    ),
    "meta world_size huge": (
        _edit_json("meta.json", lambda s: {**s, "world_size": 10**30}),
        "corrupt",
        "is not an integer >= 1",
    ),
    "failed with a lone surrogate": (
        _edit_json("summary.json", lambda s: {"schema_version": 1, "status": "failed", "error": "bad \ud800 byte"}),
        "failed",
        "bad \\ud800 byte",
    ),
    "step_s NaN": (_step(step_s=math.nan), "completed", "step_s nan is not a finite number >= 0"),
    "step_s -1": (_step(step_s=-1), "completed", "step_s -1 is not a finite number >= 0"),
    "samples true": (_step(samples=True), "completed", "samples True is not an integer >= 0"),
    "step 2**63": (_step(step=2**63), "completed", "is not an integer >= 0"),
    "data_s an object": (_step(data_s={"a": 1}), "completed", "data_s {'a': 1} is not a finite number >= 0"),
    "a step twice": (_step(step=2), "completed", "step 2 logged twice"),
    "every measured step of rank 1 warm-up": (
        lambda root, dirs: (dirs[1] / "rank1.jsonl").write_text(
            "".join(
                json.dumps({**json.loads(line), "warmup": True}) + "\n" if '"step"' in line else line + "\n"
                for line in (dirs[1] / "rank1.jsonl").read_text().splitlines()
            )
        ),
        "incomplete",
        "rank1.jsonl hold(s) no measured step",
    ),
    "rank 5 of 2": (
        lambda root, dirs: (dirs[1] / "rank5.jsonl").write_bytes((dirs[1] / "rank1.jsonl").read_bytes()),
        "corrupt",
        "rank5.jsonl beyond world_size 2",
    ),
    "rank 1 missing": (
        lambda root, dirs: (dirs[1] / "rank1.jsonl").unlink(),
        "incomplete",
        "no rank log for rank(s) 1",
    ),
    "a rank log that is a directory": (
        lambda root, dirs: ((dirs[1] / "rank1.jsonl").unlink(), (dirs[1] / "rank1.jsonl").mkdir()),
        "corrupt",
        "unreadable",
    ),
    "telemetry run_id and t_s": (
        lambda root, dirs: (dirs[1] / "telemetry_rank0.jsonl").write_text(
            '{"t_s": 1.0, "run_id": "other", "rank": 0}\n{"t_s": "x"}\n{"t_s": Infinity}\n{"t_s": 2.0, "rank": -1}\n'
            '{"t_s": 3.0, "rank": 0, "gpu_util_percent": NaN, "nested": {"a": [1, {"b": 2}]}}\n'
        ),
        "completed",
        "telemetry t_s 'x' is not a finite number",
    ),
    "commbench source and junk": (
        lambda root, dirs: (root / "fuzz" / "commbench.json").write_text(
            json.dumps(
                {
                    "results": [
                        {
                            "op": "all_reduce",
                            "backend": "gloo",
                            "world_size": 2,
                            "size_bytes": 1024,
                            "time_s": 1e-5,
                            "algbw_gb_s": 0.1,
                            "busbw_gb_s": 0.1,
                            "source": "elsewhere",
                        },
                        5,
                        {"op": "all_reduce"},
                        {
                            "op": "x",
                            "backend": "gloo",
                            "world_size": 2,
                            "size_bytes": 2**64,
                            "time_s": 1e-5,
                            "algbw_gb_s": 0.1,
                            "busbw_gb_s": 0.1,
                        },
                    ]
                }
            )
        ),
        "completed",
        "size_bytes 18446744073709551616 is not an integer >= 1",
    ),
}


@pytest.mark.parametrize("name", sorted(RARE))
def test_rare_inputs(tmp_path, name):
    edit, status, words = RARE[name]
    run_dirs = write_campaign(tmp_path)
    edit(tmp_path, run_dirs)
    fast = load_quietly(tmp_path)
    check_campaign(fast, run_dirs)
    run = fast.runs.set_index("run_dir").loc[str(run_dirs[1])]
    assert run["status"] == status, run["reason"]
    said = " ".join([str(run["reason"]), *fast.problems["problem"]])
    assert words in said, said
    if name != "deep JSON in a step line":  # Arrow reads what Python's json cannot nest; the line counts there
        same_reading(fast, load_quietly(tmp_path, arrow=False))
    if name == "telemetry run_id and t_s":
        assert set(fast.telemetry["run_id"]) == {run["run_id"]}
        assert fast.telemetry["gpu_util_percent"].isna().all() and "nested.a" in fast.telemetry
    if name == "commbench source and junk":
        assert list(fast.commbench["source"]) == ["fuzz/commbench.json"]
