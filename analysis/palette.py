"""One palette for every figure: a framework always has the same colour, a loader the same line style
(the learning-rate study's figures, which compare schedules, colour by schedule).

Okabe-Ito colours (readable for colour-blind readers and in greyscale print).
"""

from __future__ import annotations

FRAMEWORK_COLORS = {
    "ddp": "#0072B2",  # blue
    "horovod": "#D55E00",  # vermillion
    "deepspeed": "#009E73",  # bluish green
    "fsdp": "#CC79A7",  # reddish purple
    "dp": "#E69F00",  # orange
}
_SPARE = ["#56B4E9", "#F0E442", "#000000", "#999999"]
# the colours curves take, in turn, where several of one panel share a framework (figures.curve_colors):
# Okabe-Ito's and darker tones apart from them, the frameworks' own colours last
CURVE_COLORS = [
    "#E69F00",
    "#000000",
    "#8C510A",
    "#762A83",
    "#56B4E9",
    "#1B7837",
    "#B2182B",
    "#999999",
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
]
LOADER_STYLES = {  # (line style, marker)
    "native": ("-", "o"),
    "native_gpu": ("-", "v"),
    "dali": ("--", "s"),
    "dali-tfrecord": ("--", "P"),
    "synthetic": (":", "^"),
}
LOADER_COLORS = {"native": "#0072B2", "native_gpu": "#009E73", "dali": "#D55E00", "dali-tfrecord": "#CC79A7"}
# breakdown parts, bottom to top of a stacked bar
BREAKDOWN_COLORS = {
    "data": "#E69F00",
    "compute": "#56B4E9",
    "allreduce (exposed)": "#D55E00",
    "allreduce": "#D55E00",
    "other": "#BBBBBB",
}
# the trace window's kernel classes (trace.trace_breakdown_bars), bottom to top
TRACE_COLORS = {
    "start-up": "#999999",
    "data": "#E69F00",
    "cuDNN conv": "#0072B2",
    "GEMM": "#56B4E9",
    "other compute": "#9ECAE1",
    "copies": "#F0E442",
    "allreduce (exposed)": "#D55E00",
    "other comm (exposed)": "#CC79A7",
    "idle": "#DDDDDD",
    "rest": "#F2F2F2",
}
# learning-rate schedules (optim.schedule.name): the learning-rate study's figures colour by schedule
SCHEDULE_COLORS = {
    "step": "#E69F00",  # orange
    "cosine": "#0072B2",  # blue
    "exponential": "#D55E00",  # vermillion
    "multistep": "#CC79A7",  # reddish purple
    "polynomial": "#009E73",  # bluish green
    "constant": "#555555",  # grey
}
STALL_COLORS = {"interconnect": "#0072B2", "network": "#D55E00", "cpu": "#E69F00", "disk": "#CC79A7"}
IDEAL_COLOR = "#555555"

# paper size: a double-column figure is 7 in wide; 8-9 pt text stays readable when printed
PAPER_RC = {
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "lines.linewidth": 1.4,
    "lines.markersize": 4,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "svg.fonttype": "none",
    "savefig.bbox": "tight",
    # labels carry the runs' own setting values: a "$" in one is text, never the start of mathtext
    "text.parse_math": False,
}
FULL_WIDTH_IN = 7.0
HALF_WIDTH_IN = 3.4


def framework_color(name: str) -> str:
    """The framework's colour; unknown names get a stable spare colour."""
    if name in FRAMEWORK_COLORS:
        return FRAMEWORK_COLORS[name]
    return _SPARE[sum(map(ord, str(name))) % len(_SPARE)]


def loader_color(name: str) -> str:
    """A loader's colour where a figure compares loaders (loaderbench)."""
    return LOADER_COLORS.get(name, _SPARE[sum(map(ord, str(name))) % len(_SPARE)])


def schedule_color(name: str) -> str:
    """A learning-rate schedule's colour (the study's figures); unknown names get a stable spare colour."""
    return SCHEDULE_COLORS.get(name, _SPARE[sum(map(ord, str(name))) % len(_SPARE)])


def loader_style(name: str) -> tuple[str, str]:
    return LOADER_STYLES.get(name, ("-.", "D"))
