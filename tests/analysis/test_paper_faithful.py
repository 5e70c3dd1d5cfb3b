"""The paper reports say only what the studies and the runs say: versions as meta.json records them, the
studies' facts with their quotes, what the runs were, and each exhibit's state as its section shows it."""

from __future__ import annotations

import pandas as pd

from analysis.papers.build import load_claims
from analysis.papers.common import NO_GPU, recorded_versions
from analysis.papers.stash2021 import instance_facts


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
