"""Hydra app, run on every rank: python -m benchmarks framework=ddp loader=native model.depth=50"""
from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from benchmarks import schema
from benchmarks.errors import ConfigError
from benchmarks.rankexit import exit_rank

schema.register()


@hydra.main(config_path="../conf", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    from benchmarks.app import run

    try:
        code = run(cfg)
    except ConfigError as error:
        print(f"ddlbench: error: {error}", file=sys.stderr)
        code = 2
    exit_rank(code)  # not interpreter finalization: benchmarks/rankexit.py says why


if __name__ == "__main__":
    main()
