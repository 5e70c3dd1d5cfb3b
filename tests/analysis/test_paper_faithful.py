"""The paper reports say only what the studies and the runs say: versions as meta.json records them, the
studies' facts with their quotes, what the runs were, and each exhibit's state as its section shows it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from analysis.papers import STUDIES
from analysis.papers.build import REFERENCE_DIR, build_paper, load_claims
from analysis.papers.common import NO_GPU, recorded_versions
from analysis.papers.stash2021 import instance_facts
from analysis.synthetic_logs.campaign import write_campaign
from analysis.synthetic_logs.cells import SynthCell

PAPERS = Path(__file__).resolve().parents[2] / "docs" / "papers"


def test_versions_read_every_dali_package_and_python_from_meta_json_and_cuda_only_of_gpu_runs():
    runs = pd.DataFrame(
        {
            "config.system.device": ["cpu", "cuda"],
            "meta.hardware.gpus": ["[]", "['NVIDIA H200']"],
            "meta.versions.nvidia-dali-cuda120": [None, None],
            "meta.versions.nvidia-dali-cuda130": ["2.4.0", None],
            "meta.hardware.python": ["3.11.7", "3.12.3"],
            "meta.hardware.cuda": ["13.0", "12.8"],
            "meta.versions.torch": ["2.14.1", "2.11.0"],
            "meta.versions.torchvision": ["0.29.1", "0.26.0"],
        }
    )
    assert recorded_versions(runs, "dali") == ["2.4.0"]
    assert recorded_versions(runs, "python") == ["3.11.7", "3.12.3"]
    assert recorded_versions(runs, "torch") == ["2.11.0", "2.14.1"]  # not torchvision's
    # the GPU run's runtime; the CPU run used none, whatever CUDA its torch was built for
    assert recorded_versions(runs, "cuda") == ["12.8", NO_GPU]
    assert recorded_versions(runs.iloc[:1], "cuda") == [NO_GPU]
    assert recorded_versions(runs.iloc[:1], "nccl") == [NO_GPU]


def test_stash_table_1_gives_the_instance_facts_of_the_text_with_their_quotes():
    facts = instance_facts(load_claims("stash2021")).set_index("instance")
    assert facts.at["p2.16xlarge", "GPUs (published)"] == "16"
    assert facts.at["p3.16xlarge", "GPUs (published)"] == "8"
    assert "32" in facts.loc["p3.24xlarge", "GB per GPU (published)"].tolist()
    assert facts["the study's words"].str.len().gt(20).all() and facts["place"].str.startswith("Section").all()


SEEDS = Path(__file__).resolve().parents[3] / "shared" / "seeds"
SEED_FILES = {"stash2021": "000_", "aach2023": "001_", "composable2023": "002_"}


def test_every_finding_is_quoted_from_its_study():
    """A development-time check (the texts are not shipped): each findings.csv quote is in its study."""
    if not SEEDS.is_dir():
        pytest.skip("the seed texts are not here (a development-time check)")
    findings = pd.read_csv(REFERENCE_DIR / "findings.csv", dtype=str, keep_default_na=False)
    for row in findings.itertuples():
        (path,) = SEEDS.glob(f"{SEED_FILES[row.study]}*.txt")
        assert " ".join(row.quote.split()) in " ".join(path.read_text().split()), row.key
        assert row.place and 5 <= len(row.quote.split()) <= 35, row.key


def _section(page: str, heading: str) -> str:
    return page.split(f"\n## {heading}", 1)[1].split("\n## ", 1)[0]


def test_the_pages_quote_the_studies_and_mark_our_words():
    pages = {name: (PAPERS / f"{name}.md").read_text() for name in SEED_FILES}
    aach, stash, comp = pages["aach2023"], pages["stash2021"], pages["composable2023"]
    # words the texts do not say are gone
    assert "includes ranks waiting for the slowest one" not in aach and "defined alike" not in aach
    breakdown = _section(aach, "Breakdown table (a)")
    assert 'The study: "in the ResNet50 case with 512 GPUs' in breakdown and "Ours: we set exposed" in breakdown
    # the qualifier the text gives
    modes = _section(comp, "Figure (software optimizations)")
    assert "especially in the case of locally-attached GPUs (more than 80%)" in modes
    # Figures 13 and 15 are one passage of the text, with the P3 finding; no invented split
    for figure in ("Figure 13", "Figure 15"):
        assert "the 2xlarge is the most cost optimal" in _section(stash, figure)
        assert "the text does not split them" in _section(stash, figure).split("\n", 1)[0]
    assert "large models" not in _section(stash, "Figure 14").split("\n", 1)[0]
    # a guess the user overrode on the command line says so, beside the experiment's reason
    lr = _section(aach, "LR annealing accuracy")
    assert "given on the command line (run.epochs=3), not the experiment's guess" in lr
    # every paragraph about the study is its quote or ours
    for page in pages.values():
        for line in page.splitlines():
            assert not line.startswith("Published: the study's") or "table" in line or "stack" in line, line


def test_every_page_opens_with_what_the_runs_are_and_prints_their_stand_ins_by_the_figures():
    for name in SEED_FILES:
        page = (PAPERS / f"{name}.md").read_text()
        assert page.index("## What these runs are") < page.index("## Contents"), name
        assert "CPU ranks" in _section(page, "What these runs are"), name
    aach = (PAPERS / "aach2023.md").read_text()
    runs = _section(aach, "What these runs are")
    assert "| aach2023_lr_cpu | 6 | 1, 2 CPU ranks | simple_cnn | 32 |" in runs
    # the scaling figures carry the scaling runs' stand-ins, the accuracy figure the learning-rate runs'
    assert "ResNet-50 on 32 px synthetic images" in _section(aach, "Throughput vs GPUs")
    assert "simple_cnn on 32 px" not in _section(aach, "Throughput vs GPUs")
    assert "simple_cnn on 32 px" in _section(aach, "LR annealing accuracy")


def test_a_users_own_runs_get_what_they_are_too(tmp_path):
    cells = [SynthCell("ddp", "synthetic", "resnet50", n, 1) for n in (1, 2)]
    write_campaign(tmp_path / "runs" / "mine", cells, steps=12, warmup_steps=2, campaign="aach2023_scaling")
    build_paper("aach2023", tmp_path / "runs", tmp_path / "out", jobs=1, draw=False)
    text = (tmp_path / "out" / "paper.md").read_text()
    runs = _section(text, "What these runs are")
    assert "| aach2023_scaling |" in runs and "synthetic tensors" in runs and "resnet50" in runs


STATES = ("drawn", "drawn in part: without ", "lacks ", "cannot: ", "text only: ")


@pytest.mark.parametrize("name", list(SEED_FILES))
def test_each_gallery_exhibits_state_is_what_its_section_holds(name):
    page = (PAPERS / f"{name}.md").read_text()
    contents = _section(page, "Contents")
    for exhibit in STUDIES[name].exhibits:
        (row,) = [line for line in contents.splitlines() if line.startswith(f"| {exhibit.id} |")]
        state = row.rsplit(" | ", 1)[1].rstrip(" |")
        body = _section(page, f"{exhibit.id}: ")
        drew = "![" in body or "\n| --- |" in body
        assert state == "drawn" or state.startswith(STATES[1:]), (exhibit.id, state)
        if state.startswith("cannot: "):
            assert exhibit.build is None and "Not drawn:" in body
        elif state.startswith("text only: "):  # a claim of the text no run gives: its quote, and why
            assert exhibit.from_text and 'The study: "' in body and "Text only: " in body, exhibit.id
        elif state.startswith("lacks "):
            assert "Make them with:" in body and "(make them with: " in state, exhibit.id
        elif state.startswith("drawn in part"):
            assert drew and ("Drawn in part, without:" in body or "Missing cells:" in body), exhibit.id
        else:  # drawn: what its row says it shows is there, and nothing is missing
            assert drew and "Missing cells" not in body and "Drawn in part" not in body, exhibit.id
            if "published" in exhibit.sources:
                assert 'The study: "' in body or "Published:" in body, exhibit.id
        if "published" in exhibit.sources and "![" in body:  # its figure says where the study's values are
            captions = [line for line in body.splitlines() if line.startswith("![")]
            assert any("published" in c or "the study" in c for c in captions), exhibit.id


def test_the_cpu_miniature_is_named_where_the_scaling_cells_lack():
    page = (PAPERS / "aach2023.md").read_text()
    assert "experiment=aach2023_scaling_cpu" in _section(page, "Breakdown table (b)")


# the text's claims that had no section (issue 52): (study, section, its state's start, words it must hold)
TEXT_CLAIMS = [
    (
        "stash2021",
        "BERT on p3.24xlarge",
        "text only: ",
        ("12.8% improvement in training time", "2.1 cost of running", "| 2.37 |"),
    ),
    ("stash2021", "P3 cost ranking", "text only: ", ("the 2xlarge is the most cost optimal", "least cost-optimal")),
    ("stash2021", "VGG vs ResNet", "drawn", ("| vgg16 |", "| resnet152 |", "per synchronization point")),
    ("aach2023", "DALI speed-up", "drawn", ("speed-up between 20-40%", "DALI speed-up % (measured)", "(predicted)")),
    ("aach2023", "Dataset sizes", "text only: ", ("ImageNet dataset (144 GB) and the raw JPG data (154 GB)",)),
    ("aach2023", "Frameworks by scale", "drawn in part", ("DeepSpeed shows the best", "fastest (measured)")),
    ("composable2023", "GPU memory use", "lacks ", ("massive amounts of GPU memory", "16 GB")),
    ("composable2023", "GPU memory-access time", "text only: ", ("percentage of time the model spent accessing GPU",)),
]


@pytest.mark.parametrize(("name", "exhibit", "state", "words"), TEXT_CLAIMS)
def test_the_texts_claims_have_their_sections_with_quote_and_place(name, exhibit, state, words):
    page = (PAPERS / f"{name}.md").read_text()
    (row,) = [line for line in _section(page, "Contents").splitlines() if line.startswith(f"| {exhibit} |")]
    assert row.rsplit(" | ", 1)[1].startswith(state), row
    body = _section(page, f"{exhibit}: ")
    assert 'The study: "' in body, exhibit
    for word in words:
        assert word in body, (exhibit, word)


def test_gpu_memory_use_sets_each_gpu_cells_peak_beside_the_studys_16_gb(tmp_path):
    import json

    cells = [SynthCell("ddp", "synthetic", "resnet50", 2, 1)]
    write_campaign(tmp_path / "runs", cells, steps=12, warmup_steps=2, campaign="composable_2023")
    for summary in (tmp_path / "runs").rglob("summary.json"):  # what a GPU run records (torch's peaks)
        data = json.loads(summary.read_text())
        summary.write_text(json.dumps({**data, "peak_allocated_bytes": 5 * 2**30, "peak_reserved_bytes": 6 * 2**30}))
    build_paper("composable2023", tmp_path / "runs", tmp_path / "out", jobs=1, draw=False)
    body = _section((tmp_path / "out" / "paper.md").read_text(), "GPU memory use: ")
    assert "peak_allocated_gib" in body and "GPU memory GB (published, V100)" in body
    assert "| 5.0 | 6.0 | 16.0 |" in body and "Missing cells" not in body
