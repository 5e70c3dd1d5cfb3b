"""`ddlbench data synth|convert`: a synthetic JPEG ImageFolder, or TFRecord shards of one (benchmarks/data/)."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.errors import ConfigError


def _new_folder(out: str, *, example: str) -> None:
    """--out must name a folder to write; an existing file is a one-line error, not a traceback."""
    if Path(out).exists() and not Path(out).is_dir():
        raise ConfigError(f"--out {out} is a file; pass a new folder to write to, e.g. --out {example}")


def cmd_data_synth(args: argparse.Namespace) -> int:
    _new_folder(args.out, example="data/synth")
    if args.format == "tfrecord" and args.first_index:
        raise ConfigError(
            f"--first-index {args.first_index} is for ImageFolders; write the held-out folder as JPEGs "
            "and convert it (ddlbench data convert)"
        )
    if args.format == "tfrecord":
        from benchmarks.data.tfrecord import synth_tfrecords

        total = synth_tfrecords(
            Path(args.out),
            num_classes=args.classes,
            images_per_class=args.per_class,
            width=args.width,
            height=args.height,
            quality=args.quality,
            seed=args.seed,
            num_shards=args.shards,
            progress=not args.quiet,
        )
        print(
            f"[ddlbench] wrote {total} JPEG records in {args.classes} classes to {args.shards} TFRecord shards "
            f"(+ DALI index files) in {args.out}"
        )
        return 0
    from benchmarks.data.synth import synth_imagefolder

    total = synth_imagefolder(
        Path(args.out),
        num_classes=args.classes,
        images_per_class=args.per_class,
        width=args.width,
        height=args.height,
        quality=args.quality,
        seed=args.seed,
        progress=not args.quiet,
        first_index=args.first_index,
    )
    print(f"[ddlbench] wrote {total} JPEGs in {args.classes} classes to {args.out}")
    return 0


def cmd_data_convert(args: argparse.Namespace) -> int:
    _new_folder(args.out, example="data/tfrecord")
    from benchmarks.data.tfrecord import convert_imagefolder

    total = convert_imagefolder(
        Path(args.source), Path(args.out), num_shards=args.shards, seed=args.seed, progress=not args.quiet
    )
    print(
        f"[ddlbench] wrote {total} JPEG records from {args.source} to {args.shards} TFRecord shards "
        f"(+ DALI index files) in {args.out}"
    )
    return 0


def add_parser(sub) -> None:
    """Register `ddlbench data synth|convert`."""
    p = sub.add_parser("data", help="make datasets")
    data_sub = p.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    s = data_sub.add_parser("synth", help="write a synthetic, learnable JPEG ImageFolder")
    s.add_argument("--out", required=True, help="new folder to write (refused if not empty)")
    s.add_argument("--classes", type=int, default=10)
    s.add_argument("--per-class", type=int, default=100, help="images per class")
    s.add_argument("--width", type=int, default=160)
    s.add_argument("--height", type=int, default=120)
    s.add_argument("--quality", type=int, default=90, help="JPEG quality 1-100")
    s.add_argument("--seed", type=int, default=0, help="the classes' look and the images (default 0)")
    s.add_argument(
        "--first-index",
        type=int,
        default=0,
        help="number the images from here: a held-out folder of the same classes (same --seed) starts past "
        "the training folder's --per-class",
    )
    s.add_argument(
        "--format",
        choices=("jpeg", "tfrecord"),
        default="jpeg",
        help="jpeg: an ImageFolder; tfrecord: tf.train.Example shards + DALI index files",
    )
    s.add_argument("--shards", type=int, default=4, help="TFRecord shards (--format tfrecord)")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_data_synth)
    c = data_sub.add_parser("convert", help="an ImageFolder of JPEGs -> TFRecord shards + DALI index files")
    c.add_argument(
        "--from", dest="source", required=True, metavar="IMAGEFOLDER", help="ImageFolder root (<class>/<image>.jpg)"
    )
    c.add_argument("--out", required=True, help="new folder to write (refused if not empty)")
    c.add_argument("--shards", type=int, default=4, help="number of TFRecord files")
    c.add_argument("--seed", type=int, default=0, help="seed of the record order (records are shuffled across shards)")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    c.set_defaults(func=cmd_data_convert)
