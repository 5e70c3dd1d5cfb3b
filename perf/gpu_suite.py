"""The GPU suite: every README headline that a lent H200 re-measures, planned in perf/gpu_suite_plan.py, run by
perf/gpu_suite.sh through this script (on the device) and reported by it.

One GPU (nvidia-h200), two measuring calls of at most 600 s: call 1 (DALI, DeepSpeed; Horovod built while the
JPEGs are written) and call 2 (transformers). Two GPUs (nvidia-h200-x2, when lent): call x2a and x2b. Each step
runs its commands once, one after the other, and turns their outputs into figures (ratios, img/s, busbw); a
step is skipped, and says so, where its estimate no longer fits the call's budget.

    python perf/gpu_suite.py plan [--call 1]                # the steps, their commands and estimates
    python perf/gpu_suite.py run --call 1 --out $OUT         # on the device (perf/gpu_suite.sh calls it)
    python perf/gpu_suite.py report A.json [B.json ...] --out docs/results/<date>-<device>.md
                                                             # the results file and the README rows that change

The commands are the maintained scripts' (perf/README.md says whose): harness_overhead.py, bare_bert_qa.py,
dali_gpu.py's data, loaders_hw_gpu.sh's 200-step loader runs, trace_gpu.sh's window against none,
references_gpu.sh's modes, maxbatch_search_gpu.sh's searches, horovod_gpu.sh's cells, deepspeed_gpu.sh's and
breakdown_gpu.sh's 2-GPU cells and commbench. tests/unit/test_gpu_suite_plan.py composes every step's
overrides on a CPU (`make test-fast`), so the plan cannot rot between lent devices.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from gpu_suite_plan import BUDGET_S, CALLS, HEADLINES, REPO, SETUP_S, STEPS, Run, Step, estimate_s, steps_of

# --- on the device ----------------------------------------------------------------------------------------


def _summary(root: Path, label: str) -> dict:
    path = root / label / "summary.json"
    return json.loads(path.read_text()) if path.exists() else {"status": "no summary"}


def _extract(kind: str, root: Path, run: Run, log: str) -> dict[str, float]:
    if kind == "commbench":
        rows = json.loads((root / "commbench-g2.json").read_text())
        values = {}
        for row in rows:
            if row["op"] == "all_reduce" and row["size_bytes"] in (2**30, 2**32):
                values[f"busbw_{row['size_bytes'] // 2**30}GiB"] = row["busbw_gb_s"]
            if row["op"] == "p2p_copy":
                values["p2p_copy"] = max(values.get("p2p_copy", 0.0), row["algbw_gb_s"])
        return values
    if kind == "nccl_tests":  # size count type redop root time algbw busbw #wrong (out of place) ...
        values = {}
        for line in log.splitlines():
            cols = line.split()
            if len(cols) > 8 and cols[0] in (str(2**30), str(2**32)):
                values[f"busbw_{int(cols[0]) // 2**30}GiB"] = float(cols[7])
        return values
    raise ValueError(f"no extractor {kind!r}")


def run_step(step: Step, *, py: str, root: Path, out: Path, deadline: float) -> dict:
    """Run a step's commands once each; its record: each run's command, wall time, status and values."""
    record = {"step": step.name, "call": step.call, "what": step.what, "runs": {}}
    if time.monotonic() + step.estimate_s > deadline:
        record["skipped"] = f"its estimate ({step.estimate_s} s) does not fit what is left of the call's {BUDGET_S} s"
        print(f"== {step.name}: skipped, {record['skipped']}", flush=True)
        return record
    for run in step.runs:
        argv = run.args(py=py, root=root)
        print(f"== {step.name} / {run.label}: {shlex.join(argv)}", flush=True)
        start = time.monotonic()
        try:
            done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=run.cap_s)
            log, code = done.stdout + done.stderr, done.returncode
        except subprocess.TimeoutExpired as timeout:
            log, code = f"{timeout.stdout or ''}{timeout.stderr or ''}\ntimed out after {run.cap_s} s", 124
        (out / "logs").mkdir(parents=True, exist_ok=True)
        (out / "logs" / f"{run.label}.log").write_text(log if isinstance(log, str) else log.decode(errors="replace"))
        entry = {"command": shlex.join(argv), "wall_s": round(time.monotonic() - start, 1), "rc": code, "values": {}}
        try:
            if run.parse:
                found = re.search(run.parse, log)
                entry["values"] = {"value": float(found.group(1).replace(",", ""))} if found else {}
            elif run.extract:
                entry["values"] = _extract(run.extract, root, run, log)
            elif run.command == "run":
                summary = _summary(root, run.label)
                entry["status"] = summary.get("status")
                if summary.get("status") == "completed":
                    entry["values"] = {k: summary[k] for k in ("throughput_img_s", "per_gpu_img_s", "last_loss")}
        except (OSError, ValueError, KeyError) as error:
            entry["error"] = f"{type(error).__name__}: {error}"
        print(f"   rc {code}, {entry['wall_s']} s, {entry['values'] or 'no value'}", flush=True)
        record["runs"][run.label] = entry
    return record


def figures(records: list[dict]) -> dict[str, dict]:
    """Every step's figures from the runs' values (the runs of all records: a ratio may cross steps and calls)."""
    values = {label: r["values"] for rec in records for label, r in rec.get("runs", {}).items()}
    out = {}

    def pick(label: str, field: str) -> float | None:  # a parsed run (the bare loops, Horovod's own) has "value" only
        found = values.get(label, {})
        return found.get(field, found.get("value"))

    for step in STEPS:
        for fig in step.figures:
            of = pick(fig.of, fig.field)
            over = pick(fig.over, fig.field) if fig.over else 1.0
            value = of / over if of is not None and over else None
            out[fig.name] = {"step": step.name, "value": value, "unit": fig.unit, "of": fig.of, "over": fig.over}
    return out


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return {
        "ratio": f"{value:.3f}",
        "ratio4": f"{value:.4f}",  # the harness and the window: a fraction of a percent apart
        "pct": f"{value:.1%}",
        "batch": f"{value:.0f}",
        "%": f"{value:.1f}%",
    }.get(unit, f"{value:,.1f} {unit}")


def readme_rows(readme: Path = REPO / "README.md") -> dict[str, str]:
    """The Headline figures table: claim -> figure, as the README has them."""
    text = readme.read_text()
    section = text.split("## Headline figures", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] not in ("claim", "---"):
            rows[cells[0]] = cells[1]
    return rows


def headline_changes(found: dict[str, dict], readme: Path = REPO / "README.md") -> list[str]:
    """One line per README row the suite makes: the README's figure, the suite's, and whether they differ."""
    lines = []
    rows = readme_rows(readme)
    for start, names in HEADLINES.items():
        claim = next((c for c in rows if c.startswith(start)), None)
        if claim is None:
            lines.append(f"README has no row starting {start!r}: update HEADLINES in perf/gpu_suite_plan.py")
            continue
        new = [fmt(found.get(n, {}).get("value"), found.get(n, {}).get("unit", "ratio")) for n in names]
        if all(v == "-" for v in new):
            lines.append(f"not measured: {claim[:70]} (README {rows[claim]})")
            continue
        old_numbers = re.findall(r"\d[\d,]*\.?\d*", rows[claim])
        same = all(  # the number alone: "344.6 seq/s" is the README's 344.6
            v.split()[0].rstrip("%").replace(",", "") in [o.replace(",", "") for o in old_numbers]
            for v in new
            if v != "-"
        )
        lines.append(
            f"{'same   ' if same else 'CHANGED'}: {claim[:70]}: README {rows[claim]} | suite {' / '.join(new)}"
        )
    return lines


def write_results(records: list[dict], machine: dict, path: Path) -> None:
    found = figures(records)
    lines = [
        f"# The GPU suite (perf/gpu_suite.sh) — {machine.get('date', '?')}, {machine.get('device', '?')}",
        "",
        f"Machine: {machine.get('gpus', '?')}; {machine.get('cpus', '?')} CPU cores. Commit {machine.get('commit', '?')}. "
        f"Versions: {machine.get('versions', '?')}. `NCCL_NVLS_ENABLE=0`. Each command ran once (no repeats): "
        "a ratio across steps or calls compares runs minutes apart on the same machine, and across calls "
        "on a fresh one where the machine went back between them.",
        "",
        "## Figures",
        "",
        "| step | figure | value | of / over |",
        "|---|---|---|---|",
    ]
    for name, f in found.items():
        lines.append(
            f"| {f['step']} | {name} | {fmt(f['value'], f['unit'])} | {f['of']}{' / ' + f['over'] if f['over'] else ''} |"
        )
    lines += ["", "## README headline rows", "", "```", *headline_changes(found), "```", "", "## Commands", ""]
    for rec in records:
        lines.append(f"### {rec['step']} (call {rec['call']}): {rec['what']}")
        lines.append("")
        if rec.get("skipped"):
            lines += [f"Skipped: {rec['skipped']}.", ""]
            continue
        for label, r in rec["runs"].items():
            status = r.get("status") or ("ok" if r["rc"] == 0 else f"rc {r['rc']}")
            lines.append(f"- `{label}` ({r['wall_s']} s, {status}): `{r['command']}`")
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def machine_facts(py: str, commit: str, device: str) -> dict:
    def out(argv: list[str]) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return "?"

    versions = out(
        [
            py,
            "-c",
            "import sys, importlib.metadata as m, torch\n"
            "names = ['torch', 'torchvision', 'hydra-core', 'deepspeed', 'horovod', 'nvidia-dali-cuda130', 'transformers']\n"
            "have = [f'{n} {m.version(n)}' for n in names if any(d.metadata['Name'] == n for d in m.distributions())]\n"
            "nccl = '.'.join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else '-'\n"
            "print(f'python {sys.version.split()[0]}, ' + ', '.join(have) + f', NCCL {nccl}')",
        ]
    )
    gpus = out(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    cpus = out(["nproc"])
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    return {
        "date": date,
        "device": device,
        "commit": commit,
        "versions": versions,
        "gpus": gpus.replace("\n", "; "),
        "cpus": cpus,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    plan = sub.add_parser("plan", help="print the steps, their commands and estimates")
    plan.add_argument("--call", choices=CALLS)
    run = sub.add_parser("run", help="run one call's steps (on the device)")
    run.add_argument("--call", choices=CALLS, required=True)
    run.add_argument("--out", type=Path, required=True, help="$OUT: the records and the results file come back from it")
    run.add_argument(
        "--root", type=Path, default=Path("/tmp/gpu_suite"), help="the run directories (kept on the device)"
    )
    run.add_argument("--commit", default="unknown")
    run.add_argument("--steps", default="", help="comma list: only these steps")
    run.add_argument("--spent-s", type=float, default=None, help="seconds the call spent before (its setup)")
    report = sub.add_parser("report", help="the results file from calls' records (here or on the device)")
    report.add_argument("records", nargs="+", type=Path)
    report.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    if args.action == "plan":
        for call in [args.call] if args.call else list(CALLS):
            print(
                f"# call {call} ({CALLS[call]}): setup {SETUP_S[call]} s + steps = {estimate_s(call)} s of {BUDGET_S}"
            )
            for step in steps_of(call):
                print(f"## {step.name} ({step.estimate_s} s; needs {', '.join(step.needs) or '-'}): {step.what}")
                for r in step.runs:
                    print("   " + shlex.join(r.args(py="python3", root=Path("/tmp/gpu_suite"))))
        return 0
    if args.action == "report":
        records = [rec for path in args.records for rec in json.loads(path.read_text())["records"]]
        machine = json.loads(args.records[-1].read_text())["machine"]
        write_results(records, machine, args.out)
        print("\n".join(headline_changes(figures(records))))
        return 0

    spent = SETUP_S[args.call] if args.spent_s is None else args.spent_s  # the setup ran before this process
    deadline = time.monotonic() + BUDGET_S - spent
    args.root.mkdir(parents=True, exist_ok=True)
    chosen = [s for s in steps_of(args.call) if not args.steps or s.name in args.steps.split(",")]
    records = [run_step(s, py=sys.executable, root=args.root, out=args.out, deadline=deadline) for s in chosen]
    machine = machine_facts(sys.executable, args.commit, CALLS[args.call])
    # the calls before this one on the same warm machine (their ratios' denominators), then this one
    persist = Path("/tmp/gpu_suite_records.json")
    earlier = json.loads(persist.read_text())["records"] if persist.exists() else []
    earlier = [r for r in earlier if r["call"] != args.call]
    persist.write_text(json.dumps({"machine": machine, "records": earlier + records}, indent=1))
    (args.out / f"suite_call{args.call}.json").write_text(
        json.dumps({"machine": machine, "records": records}, indent=1)
    )
    name = f"{machine['date']}-{CALLS[args.call].removeprefix('nvidia-')}-suite.md"
    write_results(earlier + records, machine, args.out / name)
    print(f"== results: $OUT/{name}; README headline rows:")
    print("\n".join(headline_changes(figures(earlier + records))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
