"""Tab completion for the shell: `eval "$(ddlbench completion bash)"` (e.g. in ~/.bashrc).

The script asks `ddlbench completion complete -- WORDS...` for the candidates of the last word. It
completes subcommands, and for the commands that take overrides (run, maxbatch, loaderbench, campaign
..., stash ...): config groups (`framework=`), their options (`framework=hor` -> `framework=horovod`,
the user's own from DDLBENCH_CONFIG too) and config keys (`run.per` -> `run.per_gpu_batch=`).
"""

from __future__ import annotations

import argparse

BASH = r"""_ddlbench_complete() {
    # the words from the line itself: bash splits COMP_WORDS at '=' too
    local line=${COMP_LINE:0:COMP_POINT} IFS=$' \t\n'
    local -a words=($line)
    [[ $line == *[[:space:]] ]] && words+=("")
    local cur=${words[${#words[@]}-1]}
    IFS=$'\n'
    COMPREPLY=($(ddlbench completion complete -- "${words[@]:1}" 2>/dev/null))
    if [[ $cur == *=* && $COMP_WORDBREAKS == *=* ]]; then
        COMPREPLY=("${COMPREPLY[@]#"${cur%=*}="}")  # bash completes only what follows the '='
    fi
    [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
}
complete -o default -F _ddlbench_complete ddlbench
"""
OVERRIDE_COMMANDS = {"run", "maxbatch", "loaderbench", "campaign", "stash"}


def _keys(node, prefix: str = "") -> list[str]:
    """Every leaf key of a composed config, dotted."""
    from omegaconf import DictConfig

    out = []
    for key in node.keys():
        value = node._get_node(key)
        if isinstance(value, DictConfig):
            out += _keys(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


def candidates(words: list[str], commands: list[str]) -> list[str]:
    """What the last of `words` (the command line after `ddlbench`) can become."""
    from benchmarks.config import GROUPS, compose, options

    current = words[-1] if words else ""
    if len(words) <= 1:
        return [c for c in commands if c.startswith(current)]
    if words[0] not in OVERRIDE_COMMANDS or current.startswith("-"):
        return []
    key, sep, value = current.partition("=")
    if sep and key in GROUPS:
        return [f"{key}={o}" for o in options(key) if o.startswith(value)]
    if sep:
        return []
    groups = [f"{g}=" for g in GROUPS if g.startswith(current)]
    done = [w for w in words[1:-1] if "=" in w and not w.startswith("-")]
    try:
        cfg = compose([w for w in done if w.partition("=")[0] in GROUPS])
    except Exception:  # noqa: BLE001 (completion never fails the shell)
        return groups
    keys = [f"{k}=" for k in _keys(cfg) if k.startswith(current) and "." in k and not k.endswith("._target_")]
    return groups + keys


def add_parser(sub, commands: list[str]) -> None:
    p = sub.add_parser("completion", help='tab completion for bash: eval "$(ddlbench completion bash)"')
    action = p.add_subparsers(dest="completion_command", required=True, metavar="ACTION")
    a = action.add_parser("bash", help="print the bash completion script")
    a.set_defaults(func=lambda _args: print(BASH, end="") or 0)
    c = action.add_parser("complete", help=argparse.SUPPRESS)
    c.add_argument("words", nargs="*")
    c.set_defaults(func=lambda args: print("\n".join(candidates(args.words, commands))) or 0)
