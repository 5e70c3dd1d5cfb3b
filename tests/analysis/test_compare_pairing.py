"""`ddlbench compare` shows every cell of A and of B exactly once, whatever the other side holds, and
pairs a cell that is in both (issue 49, items 1 and 2); `--by KEY=A,B` pairs the cells of one campaign
that differ only in KEY, through the pairing `paper --baseline` uses.

The property draws two campaigns as synthetic_logs writes them: cells (framework, loader, GPUs, batch), their
repeats, failed repeats, empty sides, and a setting only A records (a newer ddlbench), constant or told
apart per cell.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from analysis.campaign_analysis import CampaignAnalysis
from analysis.compare import across_systems, by_hint, pair
from analysis.synthetic_logs.campaign import write_campaign
from analysis.synthetic_logs.cells import SynthCell
from benchmarks.errors import ConfigError
from ddlbench.cli import main

PAIRED = {"regression", "improvement", "ok"}
# the example count is the profile's (tests/conftest.py: 40 in `make test`, 10 in `make test-fast`)
PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SETTINGS = (["ddp", "horovod"], ["native", "dali"], [1, 2], [32, 64])  # framework, loader, GPUs, batch
spec = st.tuples(*map(st.sampled_from, SETTINGS))
spec_with_extra = st.tuples(*map(st.sampled_from, SETTINGS), st.sampled_from([1, 2]))  # run.new_setting
# per cell: its repeats' fates (a cell of failed repeats only has runs but no counted one)
repeats = st.lists(st.sampled_from(["completed", "completed", "failed"]), min_size=1, max_size=2)


def _write(root: Path, cells: dict, *, campaign: str, extra: str) -> None:
    """cells: {(framework, loader, gpus, batch, extra value or None): fates}; extra: 'none' | 'constant' |
    'varying' (run.new_setting, which only this campaign records)."""
    by_extra: dict = {}
    for (framework, loader, gpus, batch, value), fates in cells.items():
        for repeat, fate in enumerate(fates):
            cell = SynthCell(framework, loader, "resnet50", gpus, 1, per_gpu_batch=batch, repeat=repeat, fate=fate)
            by_extra.setdefault(value, []).append(cell)
    for value, written in by_extra.items():
        out = root / f"x{value}"
        write_campaign(out, written, steps=4, warmup_steps=1, campaign=campaign, commbench=False)
        if extra != "none":
            for config in out.glob("*/*/config.yaml"):  # the run block ends config.yaml
                config.write_text(config.read_text() + f"  new_setting: {value}\n")


def _sides(draw_a: dict, draw_b: dict, extra: str) -> tuple[dict, dict]:
    a = {(*key, 1 if extra == "constant" else value): fates for (*key, value), fates in draw_a.items()}
    if extra == "none":
        a = {(*key[:4], None): fates for key, fates in a.items()}
    b = {(*key, None): fates for key, fates in draw_b.items()}
    return a, b


@PROPERTY
@given(
    draw_a=st.dictionaries(spec_with_extra, repeats, max_size=4),
    draw_b=st.dictionaries(spec, repeats, max_size=4),
    extra=st.sampled_from(["none", "constant", "varying"]),
)
# A's two cells differ only in a setting B does not record: they were pooled into one row, paired with B's
@example(
    draw_a={("ddp", "native", 1, 32, 1): ["completed"], ("ddp", "native", 1, 32, 2): ["completed"]},
    draw_b={("ddp", "native", 1, 32): ["completed"]},
    extra="varying",
)
def test_every_cell_of_a_and_of_b_is_one_row_and_a_cell_in_both_is_paired(draw_a, draw_b, extra):
    a, b = _sides(draw_a, draw_b, extra)
    with tempfile.TemporaryDirectory() as tmp:
        _write(Path(tmp) / "a", a, campaign="a", extra=extra)
        _write(Path(tmp) / "b", b, campaign="b", extra="none")
        (Path(tmp) / "a").mkdir(exist_ok=True)
        (Path(tmp) / "b").mkdir(exist_ok=True)
        counted = {
            side: {k: f.count("completed") for k, f in cells.items() if "completed" in f}
            for side, cells in (("a", a), ("b", b))
        }
        analysis_a, analysis_b = CampaignAnalysis(Path(tmp) / "a"), CampaignAnalysis(Path(tmp) / "b")
        if not counted["a"] or not counted["b"]:
            with pytest.raises(ConfigError, match="holds no completed run"):
                analysis_a.compare(analysis_b)
            return
        table = analysis_a.compare(analysis_b)

    def shown(tag: str) -> Counter:
        rows = table[table[f"throughput_img_s_{tag}"].notna()]
        return Counter(
            zip(
                rows["framework"], rows["loader"], rows["world_size"], rows["per_gpu_batch"], rows[f"num_repeats_{tag}"]
            )
        )

    for tag in ("a", "b"):  # every counted cell once, with its own repeats: none pooled, none left out
        assert shown(tag) == Counter((*key[:4], n) for key, n in counted[tag].items()), (tag, table)
    # a cell in both (its configuration one cell on each side) is paired: one row with both sides
    group_a = Counter(key[:4] for key in a)
    for key in a:
        both = key[:4] in {k[:4] for k in b} and group_a[key[:4]] == 1
        in_a, in_b = key in counted["a"], (*key[:4], None) in counted["b"]
        rows = table[
            (table["framework"] == key[0])
            & (table["loader"] == key[1])
            & (table["world_size"] == key[2])
            & (table["per_gpu_batch"] == key[3])
        ]
        if both and in_a and in_b:
            assert len(rows) == 1 and rows["flag"].iloc[0] in PAIRED, (key, table)
        elif both and in_a:
            assert rows["flag"].tolist() == ["incomplete in B"], (key, table)
        elif in_a:
            assert "missing in B" in set(rows["flag"]), (key, table)
    assert table["match_key"].is_unique


def test_pair_is_one_to_one_and_leaves_ambiguous_cells_alone():
    a = pd.Series(["x", "y", "y", "z"], index=["a1", "a2", "a3", "a4"])
    b = pd.Series(["x", "y", "w"], index=["b1", "b2", "b3"])
    keys_a, keys_b = pair(a, b)
    assert keys_a.tolist() == ["x", "A a2", "A a3", "A a4"]
    assert keys_b.tolist() == ["x", "B b2", "B b3"]


@pytest.fixture(scope="module")
def frameworks(tmp_path_factory):
    """One campaign: DDP and Horovod on 1 and 2 GPUs with native; DDP only with DALI; 2 repeats each."""
    root = tmp_path_factory.mktemp("frameworks")
    cells = [
        SynthCell(framework, loader, "resnet50", gpus, 1, repeat=repeat)
        for framework, loader in (("ddp", "native"), ("horovod", "native"), ("ddp", "dali"))
        for gpus in (1, 2)
        for repeat in (0, 1)
    ]
    write_campaign(root, cells, steps=6, warmup_steps=1, campaign="mix", commbench=False)
    return root


def test_by_pairs_cells_that_differ_only_in_the_key(frameworks, capsys):
    analysis = CampaignAnalysis(frameworks)
    table = analysis.compare(analysis, by=("framework", "ddp", "horovod")).set_index(["loader", "world_size"])
    assert len(table) == 4  # 2 pairs (native, 1 and 2 GPUs) and the 2 DALI cells horovod lacks
    for gpus in (1, 2):
        row = table.loc[("native", gpus)]
        assert row["framework"] == "ddp->horovod" and row["flag"] in PAIRED
        assert row["num_repeats_a"] == 2 and row["num_repeats_b"] == 2
        assert pd.notna(row["throughput_img_s_ci_low_a"]) and pd.notna(row["throughput_img_s_ci_low_b"])
    assert set(table.loc["dali", "flag"]) == {"missing in B"}
    assert main(["compare", str(frameworks), "--by", "framework=ddp,horovod", "--allow-missing"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("B = framework=horovod against A = framework=ddp")
    assert "ddp->horovod" in out and "0 regression, 2 missing in B" in out
    table = analysis.compare(analysis, by=("loader", "native", "dali"))
    assert len(table) == 4 and (table["flag"] == "only in B").sum() == 0
    assert set(table.loc[table["flag"].isin(PAIRED), "loader"]) == {"native->dali"}


@pytest.mark.parametrize(
    ("by", "words"),
    [
        (
            "framework=ddp,deepspeed",
            "no run of RUNS has framework=deepspeed; framework there: ddp (8 runs), horovod (4 runs)",
        ),
        ("colour=red,blue", "no run has a setting colour; settings that differ between the runs: framework, loader"),
        ("framework=ddp", "--by framework=ddp: give one setting and its two values to compare, KEY=A,B"),
        ("framework=ddp,ddp", "give one setting and its two values"),
    ],
)
def test_by_a_key_or_value_that_matches_no_cell_is_one_line(frameworks, capsys, by, words):
    assert main(["compare", str(frameworks), "--by", by]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and err[0].startswith("ddlbench: error:"), err


def test_empty_b_or_a_is_one_line_exit_2(frameworks, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    for argv, side in (([frameworks, empty], f"B={empty}"), ([empty, frameworks], f"A={empty}")):
        assert main(["compare", *map(str, argv)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{side} holds no completed run" in err[0], err
    assert main(["compare", str(frameworks)]) == 2
    assert "give a second runs directory B, or --by KEY=A,B" in capsys.readouterr().err


def test_campaigns_without_a_common_cell_hint_at_by(tmp_path, capsys):
    for framework in ("ddp", "horovod"):
        cells = [SynthCell(framework, "native", "resnet50", gpus, 1) for gpus in (1, 2)]
        write_campaign(tmp_path / framework, cells, steps=6, warmup_steps=1, campaign=framework, commbench=False)
    a, b = tmp_path / "ddp", tmp_path / "horovod"
    assert by_hint(CampaignAnalysis(a).runs(), CampaignAnalysis(b).runs()) == ("framework", "ddp", "horovod")
    assert main(["compare", str(a), str(b)]) == 1
    assert f"ddlbench compare {a} {b} --by framework=ddp,horovod" in capsys.readouterr().out
    assert main(["compare", str(a), str(b), "--by", "framework=ddp,horovod"]) == 0
    out = capsys.readouterr().out
    assert out.count("ddp->horovod") == 2 and "0 regression, 0 missing in B" in out


def test_baseline_system_pairs_through_the_same_pairing(tmp_path):
    """Two baseline cells of one configuration (two campaigns in one folder): which is the baseline is
    unknown, so the other system's cell has no relative time (it took the first one before)."""
    cells = [SynthCell("ddp", "synthetic", "resnet50", 4, 1, system=s) for s in ("local", "switched")]
    write_campaign(tmp_path / "one", cells, steps=6, warmup_steps=1, campaign="one", commbench=False)
    write_campaign(tmp_path / "two", cells[:1], steps=6, warmup_steps=1, campaign="two", commbench=False)
    analysis = CampaignAnalysis(tmp_path)
    table = across_systems(analysis.cells(), analysis.counted(), baseline="local")
    assert len(table) == 3
    assert table.loc[table["system"] == "switched", "relative_time"].isna().all()
    assert (table.loc[table["system"] == "local", "relative_time"] == 1).all()


def _staged(root: Path, framework: str = "ddp", *, stage: str | None) -> Path:
    """A campaign whose runs set data.stage (stage None: runs from before the setting, which record none)."""
    cells = [SynthCell(framework, "native", "resnet50", gpus, 1) for gpus in (1, 2)]
    write_campaign(root, cells, steps=6, warmup_steps=1, campaign=root.name, commbench=False)
    if stage is not None:
        for config in root.glob("*/*/config.yaml"):
            config.write_text(config.read_text().replace("data:\n", f"data:\n  stage: {stage}\n", 1))
    return root


def test_a_later_setting_one_side_records_at_its_old_value_tells_cells_apart_and_pairs_by_it(tmp_path, capsys):
    """data.stage=none is left out of a run (cell_identity.ADDED_SETTING_DEFAULTS: older runs stay their cell); a campaign staged
    to node-local disk against one that read the shared file system differs in it all the same."""
    a, b = _staged(tmp_path / "staged", stage="node_local"), _staged(tmp_path / "shared", stage=None)
    assert by_hint(CampaignAnalysis(a).runs(), CampaignAnalysis(b).runs()) == ("data.stage", "node_local", "none")
    assert main(["compare", str(a), str(b)]) == 1
    assert f"ddlbench compare {a} {b} --by data.stage=node_local,none" in capsys.readouterr().out
    assert main(["compare", str(a), str(b), "--by", "data.stage=node_local,none"]) == 0
    assert "0 regression, 0 missing in B" in capsys.readouterr().out


def test_campaigns_that_differ_in_two_settings_say_both(tmp_path, capsys):
    a = _staged(tmp_path / "staged", "ddp", stage="node_local")
    b = _staged(tmp_path / "shared", "horovod", stage=None)
    assert main(["compare", str(a), str(b)]) == 1
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("No cell of B is a cell of A: they differ in data.stage (A: node_local; B: none); ")
    assert "framework (A: ddp; B: horovod)" in line
