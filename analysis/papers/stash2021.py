"""Seed study B: Stash, a stall-centric characterisation of distributed training in the cloud (AWS P2
and P3 instances): interconnect, network, CPU and disk stalls from paired runs, their cost, and the
stalls against model depth."""

from __future__ import annotations

import pandas as pd

from analysis.figures import model_key
from analysis.interconnect import h2d_bars
from analysis.papers import figures
from analysis.papers.base import Exhibit, PaperInput, Section, Study
from analysis.papers.common import guesses_table
from analysis.stash import stash_stalls
from benchmarks import resources

STUDY_RUNS = "ddlbench stash run system=<instance profile> model=<model> run.per_gpu_batch=<32|128>"
DEPTH = "ddlbench stash run experiment=stash2021_depth system=<instance profile>"
PRICES = resources.conf_dir() / "stash" / "prices.yaml"  # the shipped table, in a checkout or a wheel
NOT_IN_TEXT = (
    "the study's numbering implies it, but the text we hold never cites it, so what it shows is unknown "
    "(analysis/reference/exhibits.csv)"
)
# the study's words on Figures 13 and 15 (one passage for both)
P3_COST = ("cost_p3_cheapest", "cost_p3_dearest", "cost_network_dearest")
METHOD = (
    "a diagram of the method: the paired runs it shows are what `ddlbench stash plan` lists and every stall "
    "section below measures (docs/stash.md); nothing to measure in it"
)


def stalls(paper: PaperInput) -> pd.DataFrame:
    """The Stash stalls of the study's runs, paired within each system profile (an instance type)."""
    per_run = paper.analysis.run_throughput()
    if per_run.empty:
        return stash_stalls(per_run)
    runs = paper.analysis.counted()
    system = runs[["run_id", "config.system.name"]].rename(columns={"config.system.name": "system"})
    return stash_stalls(per_run.merge(system, on="run_id", how="left"))


def _labels(table: pd.DataFrame, columns: list[str]) -> pd.Series:
    """A bar's label: the columns' values (batch as b<N>), and the campaign where two bars would read alike."""
    parts = table[columns].astype(str)
    # what every bar shares is the figure's, not the label's (the model always names its bar)
    parts = parts[[c for c in columns if c == "model" or parts[c].nunique() > 1]]
    if "per_gpu_batch" in parts:
        parts["per_gpu_batch"] = "b" + parts["per_gpu_batch"]
    label = parts.agg(" ".join, axis=1)
    if "campaign" in table and label.duplicated(keep=False).any():
        label = label + " (" + table["campaign"].astype(str) + ")"
    return label


def _partial_runs(section: Section, table: pd.DataFrame) -> None:
    """What of a stall or cost figure's content the runs do not have: the study's AWS instance types, and
    its mini-batches 32 and 128."""
    systems = sorted(set(table["system"].dropna().astype(str)))
    if not any(s.startswith(("p2", "p3")) for s in systems):
        section.drawn_without(f"the study's P2/P3 instance types (these runs: system {', '.join(systems) or '?'})")
    batches = {int(b) for b in table["per_gpu_batch"].dropna()}
    if not batches & {32, 128}:
        section.drawn_without(f"its mini-batches 32 and 128 (these runs: {', '.join(map(str, sorted(batches)))})")


def _stalls(exhibit: str, title: str, kinds: tuple[str, ...], published: tuple[str, ...]) -> Exhibit:
    """A stall figure of the study in its own reading: CPU and disk stalls in % of the total training time,
    interconnect and network stalls against the paired baseline (with the study's 500% beside the network's)."""
    reading = "stall_pct_of_training" if set(kinds) <= {"cpu", "disk"} else "stall_pct"
    what = " and ".join(k if k in ("interconnect", "network") else k.upper() if k == "cpu" else k for k in kinds)
    sources = ("measured", "published") if "network" in kinds else ("measured",)
    return Exhibit(
        exhibit, title, sources, _stall_section(kinds, reading=reading, what=f"{what} stalls", published=published)
    )


def _stall_section(kinds: tuple[str, ...], *, reading: str, what: str, published: tuple[str, ...]) -> callable:
    """A stall figure: the stalls of `kinds` per system, model and per-GPU batch, in the study's reading
    (stall_pct: against the paired baseline; stall_pct_of_training: against the stalled run's time)."""

    def build(paper: PaperInput) -> Section:
        section = Section()
        table = stalls(paper)
        table = table[table["stall"].isin(kinds)] if not table.empty else table
        unit = "% of the paired baseline's time" if reading == "stall_pct" else "% of the total training time"
        section.says(paper, *published)
        section.text(f"Measured: {what}, in {unit} ({reading}), one bar per system, model and batch.")
        if table.empty:
            section.lacks(f"{' and '.join(kinds)} stalls: paired Stash runs (see `ddlbench stash plan`)", STUDY_RUNS)
            return section
        _partial_runs(section, table)
        shown = table[["stall", "system", "model", "per_gpu_batch", "world_size", "num_nodes", "stall_s", reading]]
        section.table(shown.round(2))
        if (shown["stall_s"] < 0).any():
            section.text(
                "A negative stall: the stalled run was the faster of the pair, so the stall is below the noise of "
                "runs this short (repeat them with stash.repeats for intervals: docs/stash.md)."
            )
        labelled = shown.assign(
            label=_labels(table, ["stall", "system", "model", "per_gpu_batch"]), published=float("nan")
        )
        if reading == "stall_pct" and "network" in kinds:
            # the study's one network figure: "network stalls as high as 500%" (two p3.8xlarge)
            labelled["published"] = paper.claim("network_stall_pct_max_p3_8xlarge_x2")
        caption = f"{what} (measured), {unit}."
        if labelled["published"].notna().any():
            caption += " Grey: the highest network stall the study reports ('as high as 500%', two p3.8xlarge)."
        section.figure(
            "stalls",
            lambda: figures.beside_published(
                labelled, label="label", value=reading, published="published", unit=unit, title=what
            ),
            caption,
        )
        return section

    return build


def _per_instance(what: str, published: tuple[str, ...]) -> callable:
    """Training time (what="time") or dollar cost (what="cost") per epoch of each system profile, the
    study's per-instance bars (the price table's illustrative prices unless the user gives theirs); published:
    the keys of the study's words on them."""
    column, unit = {"time": ("epoch_h", "hours per epoch"), "cost": ("usd_per_epoch", "$ per epoch")}[what]

    def build(paper: PaperInput) -> Section:
        from analysis.stash import cost_table, load_prices

        section = Section()
        per_run = paper.analysis.run_throughput()
        section.says(paper, *published)
        section.ours("the study's bars are not in its text.")
        section.text(
            "Measured: per system profile and configuration (median over repeats), an ImageNet epoch's hours at the "
            "measured throughput and its cost = GPUs x hours x the price per GPU-hour of conf/stash/prices.yaml "
            "(illustrative list prices: put your contract's there, or stash.prices=<file>)."
        )
        if per_run.empty:
            section.lacks("time and cost: completed Stash runs on the instance profiles", STUDY_RUNS)
            return section
        costs = cost_table(per_run, paper.analysis.counted(), load_prices(PRICES), epoch_samples=1_281_167)
        # the study's bars are training runs on an instance's every GPU, with real data where it read any
        real = costs[costs["loader"] != "synthetic"]
        shown = (real if not real.empty else costs).sort_values(["system", "model", "world_size", "num_nodes"])
        shown = shown[shown["world_size"] == shown.groupby("system")["world_size"].transform("max")]
        section.table(shown.round(4))
        _partial_runs(section, shown)
        if costs["system"].nunique() < 2:
            section.lacks("time and cost per instance: runs on two or more system profiles", STUDY_RUNS)
        labelled = shown.assign(
            label=_labels(shown, ["system", "model", "loader", "cache", "per_gpu_batch", "num_nodes"]),
            published=float("nan"),
        )
        section.figure(
            what,
            lambda: figures.beside_published(
                labelled, label="label", value=column, published="published", unit=unit, title=f"{unit} per instance"
            ),
            f"{unit.capitalize()} per system profile (measured, at illustrative prices for the cost).",
        )
        return section

    return build


def pcie_bandwidth(paper: PaperInput) -> Section:
    section = Section()
    h2d = paper.analysis.h2d_bandwidth()
    section.says(paper, "pcie_p2_16x_least", "num_workers_sharing_pcie_p2_16xlarge")
    section.text(
        "Measured: the host-to-device bandwidth per GPU that `ddlbench commbench` records with every GPU copying "
        "at once."
    )
    if h2d.empty:
        section.lacks(
            "per-GPU PCIe bandwidth: a commbench run on the GPU machine",
            "ddlbench commbench --nproc <GPUs per node> (it writes runs/commbench/, which the paper reads)",
        )
        return section
    section.table(h2d.round(2))
    section.figure("h2d", lambda: h2d_bars(h2d), "Host-to-device bandwidth per GPU, all GPUs at once (measured).")
    return section


def depth_section(kind: str) -> callable:
    def build(paper: PaperInput) -> Section:
        section = Section()
        table = stalls(paper)
        table = table[table["stall"] == kind] if not table.empty else table
        section.says(
            paper,
            "stalls_grow_with_layers",
            "vgg_lower_interconnect" if kind == "interconnect" else "vgg_higher_network",
            "residual_no_impact",
            "bn_lowers",
        )
        section.text(
            f"Measured: the {kind} stall (s, and % of the paired baseline) per model, ordered by family and depth."
        )
        if table.empty:
            section.lacks(f"{kind} stall per depth: the Stash depth sweep", DEPTH)
            return section
        table = table.sort_values("model", key=lambda m: m.map(model_key))
        section.table(
            table[["model", "system", "per_gpu_batch", "world_size", "num_nodes", "stall_s", "stall_pct"]].round(3)
        )
        wanted = {"resnet18", "resnet50", "resnet152", "vgg11", "vgg16", "vgg19"}
        lacking = sorted(wanted - set(table["model"]))
        if lacking:
            section.lacks(f"{kind} stall of {', '.join(lacking)}", DEPTH)
        labelled = table.assign(label=_labels(table, ["model"]), published=float("nan"))
        section.figure(
            "depth",
            lambda: figures.beside_published(
                labelled,
                label="label",
                value="stall_s",
                published="published",
                unit="stall (s)",
                title=f"{kind} stall per model",
            ),
            f"{kind.capitalize()} stall per model and depth (measured).",
        )
        guesses = guesses_table(paper.analysis)
        if not guesses.empty:
            section.text("Where the experiment had to guess (experiment.guesses):")
            section.table(guesses)
        return section

    return build


def parameters(paper: PaperInput) -> Section:
    """Trainable parameters per model as this suite builds it, beside the two the text gives."""
    from analysis.stash import model_view

    section = Section()
    runs = paper.analysis.counted()
    published = {"vgg16": paper.claim("params_million_vgg16"), "resnet152": paper.claim("params_million_resnet152")}
    rows = []
    models = set(runs["model"].dropna()) if "model" in runs else set()
    for model in sorted(models | set(published), key=model_key):
        sample = runs[runs["model"] == model].head(1)
        if sample.empty:
            arch, depth, shape = model.rstrip("0123456789"), int("".join(filter(str.isdigit, model)) or 0), {}
        else:
            row = sample.iloc[0]
            arch, depth = row.get("config.model.arch"), row.get("config.model.depth")
            shape = {
                k: row.get(f"config.model.{k}")
                for k in ("batch_norm", "residual")
                if pd.notna(row.get(f"config.model.{k}"))
            }
        try:
            view = model_view(str(arch), int(depth) if pd.notna(depth) else None, 1000, **shape)
            params_m = view["grad_bytes"] / 4 / 1e6
            layers = view["num_layers"]
        except Exception as error:  # a model this suite cannot build: say so in the row
            params_m, layers = float("nan"), f"cannot build: {error}"
        rows.append(
            {
                "model": model,
                "parameters (M, measured)": params_m,
                "parameters (M, published)": published.get(model, float("nan")),
                "gradient tensors (L)": layers,
            }
        )
    section.says(paper, "params_million_vgg16")
    section.text("Measured: the parameters and gradient tensors of each model as ddlbench builds it (1000 classes).")
    section.table(pd.DataFrame(rows).round(2))
    return section


def bert_24xlarge(paper: PaperInput) -> Section:
    section = Section()
    section.says(
        paper, "batch_size_bert_24xlarge", "time_improvement_pct_bert_24xlarge_batch8", "price_usd_bert_16xlarge_batch4"
    )
    section.published(
        paper,
        "batch_size_bert_24xlarge",
        "time_improvement_pct_bert_24xlarge_batch8",
        "price_usd_bert_24xlarge_batch8",
        "price_usd_bert_16xlarge_batch4",
        "batch_size_ratio_bert_16xlarge_vs_24xlarge",
    )
    section.text_only(
        "BERT on a p3.24xlarge at batch 8 against a p3.16xlarge at batch 4, priced by AWS: runs on those two "
        "instance types give its time (ddlbench stash run system=<p3.24xlarge profile> model=bert "
        "run.per_gpu_batch=8, and system=<p3.16xlarge profile> run.per_gpu_batch=4), the price is AWS's"
    )
    return section


def p3_cost_ranking(paper: PaperInput) -> Section:
    section = Section()
    section.says(paper, *P3_COST)
    section.text_only(
        "a ranking of AWS's P3 instance types by cost; Figures 13 and 15's sections draw each instance's cost "
        f"and time from runs on them ({STUDY_RUNS})"
    )
    return section


def vgg_vs_resnet(paper: PaperInput) -> Section:
    """The text's argument (its Section 6.1): VGG sends more gradient bytes in fewer layers than ResNet, so
    NVLink's latency costs ResNet more, and the network's bandwidth VGG; its two terms as this suite builds
    the two models."""
    from analysis.stash import model_view

    section = Section()
    section.says(paper, "vgg_per_sync_point", "deep_vs_shallow", "params_million_vgg16", "nvlink_bandwidth_gbit_s_min")
    rows = []
    for model, arch, depth in (("vgg16", "vgg", 16), ("resnet152", "resnet", 152)):
        view = model_view(arch, depth, 1000)
        rows.append(
            {
                "model": model,
                "gradient MB (G, measured)": view["grad_bytes"] / 1e6,
                "parameters (M, measured)": view["grad_bytes"] / 4 / 1e6,
                "parameters (M, published)": paper.claim(f"params_million_{model}"),
                "gradient tensors (L, measured)": view["num_layers"],
            }
        )
    section.text(
        "Measured: the argument's two terms, the gradient bytes G and the layers L whose gradients are sent, of "
        "VGG16 and ResNet152 as ddlbench builds them (1000 classes, fp32 gradients), beside the parameters the "
        "text gives."
    )
    section.table(pd.DataFrame(rows).round(1))
    section.ours(
        "the stalls the argument explains are Figures 19 and 20's sections (interconnect and network stall vs "
        "model depth, VGG and ResNet)."
    )
    return section


# Table 1's facts as the text gives them: (instance, GPUs, per-GPU memory GB, claims.csv key of the quote);
# a value the text gives as a ratio to another instance is worked out from it, and the row says so
INSTANCE_FACTS = (
    ("p2.xlarge", "1", "", "num_gpus_p2_xlarge"),
    ("p2.8xlarge", "8 (half the 16xlarge's: 'twice the resources')", "", "resources_ratio_p2_16xlarge_vs_8xlarge"),
    ("p2.16xlarge", "16", "", "num_gpus_p2_16xlarge"),
    ("p3.8xlarge", "4 (half the 16xlarge's)", "", "gpus_ratio_p3_8xlarge_vs_16xlarge"),
    ("p3.16xlarge", "8", "16 (half the 24xlarge's)", "num_gpus_p3_16xlarge"),
    ("p3.24xlarge", "8 (as the 16xlarge)", "", "memory_ratio_p3_24xlarge_vs_16xlarge"),
    ("p3.24xlarge", "", "32", "gpu_memory_gb_p3_24xlarge"),
)


def instance_facts(claims: pd.DataFrame) -> pd.DataFrame:
    """Table 1 as far as the text gives it: per instance type its GPUs and per-GPU memory, each with the
    quote and place it comes from (claims.csv)."""
    by_key = claims.set_index("key")
    rows = [
        {
            "instance": instance,
            "GPUs (published)": gpus or "-",
            "GB per GPU (published)": memory or "-",
            "the study's words": by_key.at[key, "quote"],
            "place": by_key.at[key, "place"],
        }
        for instance, gpus, memory, key in INSTANCE_FACTS
    ]
    return pd.DataFrame(rows)


def instances(paper: PaperInput) -> Section:
    from analysis.stash import load_prices

    section = Section()
    prices = load_prices(PRICES)
    section.text(
        "Published: the instance facts the study's text gives (its Table 1 itself is not in the text we hold: "
        "vCPUs, DRAM and storage are not given, beyond the p3.24xlarge's 'dedicated local SSD storage along with "
        "more vCPUs and DRAM than the 16xlarge'). The p3.2xlarge is named but its size is not given."
    )
    section.table(instance_facts(paper.claims))
    section.text("Ours: the system profiles ddlbench prices and links (conf/stash/prices.yaml, illustrative prices).")
    section.table(pd.DataFrame([{"system": k, **v} for k, v in prices.items()]))
    return section


STUDY = Study(
    name="stash2021",
    title="Stash: a stall-centric characterisation of distributed training in the cloud (AWS P2 and P3)",
    campaigns=("stash", "stash2021", "stash2021_depth", "stash2021_depth_cpu", "stash2021_cpu"),
    commands=(STUDY_RUNS, DEPTH),
    exhibits=(
        Exhibit("Figure 1", "(not cited in the text we have)", (), why_not=NOT_IN_TEXT),
        Exhibit(
            "Figure 2",
            "NVLink crossbar of the p3.16xlarge",
            (),
            why_not=(
                "a diagram of AWS's GPU interconnect; each run here records its own (`nvidia-smi topo -m`, meta.json) "
                "and Figure 9's section measures what its links deliver"
            ),
        ),
        Exhibit("Figure 3", "(not cited in the text we have)", (), why_not=NOT_IN_TEXT),
        Exhibit("Table 1", "Instance types", ("published",), instances),
        Exhibit("Table 2", "Trainable parameters per model", ("measured", "published"), parameters),
        Exhibit("Figure 4(a)", "Interconnect stall: the paired runs", (), why_not=METHOD),
        Exhibit("Figure 4(b)", "Interconnect stall: an example", (), why_not=METHOD),
        Exhibit("Figure 5", "Network stall: the paired runs", (), why_not=METHOD),
        _stalls(
            "Figure 6",
            "CPU and disk stalls, P2",
            ("cpu", "disk"),
            ("cpu_negligible_p2", "disk_largest_p2_16x"),
        ),
        _stalls(
            "Figure 7",
            "Interconnect stalls, P2",
            ("interconnect",),
            ("interconnect_p2_16x",),
        ),
        Exhibit(
            "Figure 8(a)",
            "Training time per P2 instance",
            ("measured",),
            _per_instance("time", ("time_p2_16x_slower", "cost_ratio_p2_16xlarge_vs_8xlarge")),
        ),
        Exhibit(
            "Figure 8(b)",
            "Cost per P2 instance",
            ("measured",),
            _per_instance("cost", ("cost_p2_linear", "num_gpus_p2_xlarge")),
        ),
        Exhibit("Figure 9", "Per-GPU PCIe bandwidth, all GPUs at once", ("measured",), pcie_bandwidth),
        _stalls(
            "Figure 10",
            "CPU and disk stalls, P3, small models",
            ("cpu", "disk"),
            ("small_large_p3", "cpu_disk_p3"),
        ),
        _stalls(
            "Figure 11",
            "CPU and disk stalls, P3, large models",
            ("cpu", "disk"),
            ("small_large_p3", "cpu_disk_p3"),
        ),
        _stalls(
            "Figure 12",
            "Interconnect stalls of P3 instances (with Figure 14; the text does not say which models each holds)",
            ("interconnect",),
            ("interconnect_p3_lower", "interconnect_p3_8x_higher"),
        ),
        Exhibit(
            "Figure 13",
            "Cost and time of P3 instances (with Figure 15; the text does not split them): cost",
            ("measured",),
            _per_instance("cost", P3_COST),
        ),
        _stalls(
            "Figure 14",
            "Interconnect stalls of P3 instances (with Figure 12; the text does not say which models each holds)",
            ("interconnect",),
            ("interconnect_p3_lower", "interconnect_p3_8x_higher", "p3_24x_no_gain"),
        ),
        Exhibit(
            "Figure 15",
            "Cost and time of P3 instances (with Figure 13; the text does not split them): time",
            ("measured",),
            _per_instance("time", P3_COST),
        ),
        _stalls(
            "Figure 16",
            "Network stall of two p3.8xlarge",
            ("network",),
            ("network_stall_pct_max_p3_8xlarge_x2", "network_throttles"),
        ),
        Exhibit("Figure 17", "(not cited in the text we have)", (), why_not=NOT_IN_TEXT),
        Exhibit("Figure 18", "(not cited in the text we have)", (), why_not=NOT_IN_TEXT),
        Exhibit("Figure 19", "Interconnect stall vs model depth", ("measured",), depth_section("interconnect")),
        Exhibit("Figure 20", "Network stall vs model depth", ("measured",), depth_section("network")),
        Exhibit(
            "BERT on p3.24xlarge",
            "BERT at batch 8 on the p3.24xlarge against batch 4 on the p3.16xlarge (text)",
            ("published",),
            bert_24xlarge,
            from_text=True,
        ),
        Exhibit("P3 cost ranking", "P3 instance types by cost (text)", ("published",), p3_cost_ranking, from_text=True),
        Exhibit(
            "VGG vs ResNet",
            "Why VGG has low interconnect and high network stalls: gradient bytes against layers (text)",
            ("measured", "published"),
            vgg_vs_resnet,
            from_text=True,
        ),
    ),
)
