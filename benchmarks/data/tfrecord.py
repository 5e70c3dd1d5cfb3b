"""TFRecord shards of tf.train.Example records, written without TensorFlow, plus DALI index files.

A record is `uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)`
(little endian); `data` is a serialised tf.train.Example with the features
  image/encoded     bytes  the JPEG file, unchanged
  image/class/label int64  0-based class index, in ImageFolder order (sorted class folder names)
  image/class/text  bytes  the class folder name
The protobuf wire format is written here by hand (four message types, two field kinds). The DALI
index of a shard has one line `offset size` per record, as DALI's tfrecord2idx writes it.

Records are written in a seeded random order across shards: DALI readers shard by contiguous record
ranges and shuffle only inside a buffer, so class-sorted shards would give class-skewed batches.
CRC-32C comes from the `crc32c` package when installed (`.[tfrecord]`), else from a pure-Python table.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
from tqdm import tqdm

from benchmarks.errors import ConfigError

JPEG_SUFFIXES = (".jpg", ".jpeg", ".JPG", ".JPEG")
MANIFEST = "dataset.json"
RECORD_SUFFIX = ".tfrecord"
INDEX_SUFFIX = ".idx"


# --- CRC-32C (Castagnoli) and TFRecord's masking -------------------------------------------------


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc_table()


def crc32c_python(data: bytes) -> int:
    """CRC-32C of `data` (slow reference; used when the crc32c package is absent)."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:
    from crc32c import crc32c as crc32c  # the optional fast implementation (extra `tfrecord`)
except ImportError:  # pragma: no cover - depends on the environment
    crc32c = crc32c_python


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C rotated right by 15 bits plus a constant (mod 2**32)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """One TFRecord: length, its masked CRC, the data, the data's masked CRC."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


def read_records(path: Path, *, check_crc: bool = True) -> Iterator[bytes]:
    """The data of every record in one TFRecord file; a ValueError names the first corrupt record."""
    with open(path, "rb") as f:
        number = 0
        while header := f.read(12):
            if len(header) < 12:
                raise ValueError(f"{path}: record {number} is truncated")
            length_bytes, length_crc = header[:8], struct.unpack("<I", header[8:])[0]
            if check_crc and masked_crc32c(length_bytes) != length_crc:
                raise ValueError(f"{path}: record {number} has a bad length checksum")
            (length,) = struct.unpack("<Q", length_bytes)
            data, footer = f.read(length), f.read(4)
            if len(data) < length or len(footer) < 4:
                raise ValueError(f"{path}: record {number} is truncated")
            if check_crc and masked_crc32c(data) != struct.unpack("<I", footer)[0]:
                raise ValueError(f"{path}: record {number} has a bad data checksum")
            yield data
            number += 1


# --- protobuf wire format of tf.train.Example --------------------------------------------------


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF  # int64 negatives are ten-byte two's complement varints
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _feature(value: bytes | int | list[int]) -> bytes:
    if isinstance(value, bytes):  # Feature.bytes_list = 1 { BytesList.value = 1 }
        return _len_field(1, _len_field(1, value))
    values = [value] if isinstance(value, int) else value  # Feature.int64_list = 3 { packed value = 1 }
    return _len_field(3, _len_field(1, b"".join(_varint(v) for v in values)))


def encode_example(features: dict[str, bytes | int | list[int]]) -> bytes:
    """Serialise tf.train.Example{features: Features{feature: map<string, Feature>}}."""
    entries = b"".join(
        _len_field(1, _len_field(1, key.encode()) + _len_field(2, _feature(value))) for key, value in features.items()
    )
    return _len_field(1, entries)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = _read_varint(buf, pos)
            yield number, value
        elif wire_type == 2:
            length, pos = _read_varint(buf, pos)
            yield number, buf[pos : pos + length]
            pos += length
        else:
            raise ValueError(f"unsupported protobuf wire type {wire_type}")


def decode_example(data: bytes) -> dict[str, list[bytes] | list[int]]:
    """Parse what encode_example writes (bytes lists and int64 lists, packed or not)."""
    result: dict[str, list[bytes] | list[int]] = {}
    for _, features in _fields(data):
        for _, entry in _fields(features):
            fields = dict(_fields(entry))
            key = fields[1].decode()
            result[key] = _feature_values(key, fields.get(2, b""))
    return result


def _feature_values(key: str, feature: bytes) -> list[bytes] | list[int]:
    """The values of one serialised tf.train.Feature (a bytes list or an int64 list, packed or not)."""
    result: list[bytes] | list[int] = []
    for kind, payload in _fields(feature):
        if kind == 1:
            result = [v for _, v in _fields(payload)]
        elif kind == 3:
            values: list[int] = []
            for _, v in _fields(payload):
                if isinstance(v, bytes):  # packed
                    pos = 0
                    while pos < len(v):
                        x, pos = _read_varint(v, pos)
                        values.append(x - (1 << 64) if x >= 1 << 63 else x)
                else:
                    values.append(v - (1 << 64) if v >= 1 << 63 else v)
            result = values
        else:
            raise ValueError(f"feature {key!r}: float lists are not used here")
    return result


def _file_varint(f: BinaryIO) -> int:
    result = shift = 0
    while True:
        byte = f.read(1)
        if not byte:
            raise ValueError(f"{f.name}: a record ends inside a protobuf field")
        result |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return result
        shift += 7


def _file_field(f: BinaryIO) -> tuple[int, int]:
    """(field number, length) of the length-delimited protobuf field at f's position: every field of
    tf.train.Example down to its features is one."""
    key = _file_varint(f)
    if key & 7 != 2:
        raise ValueError(f"{f.name}: protobuf wire type {key & 7} where tf.train.Example has a message")
    return key >> 3, _file_varint(f)


def _example_feature(f: BinaryIO, end: int, name: bytes) -> list[bytes] | list[int] | None:
    """Feature `name` of the tf.train.Example that ends at byte `end` of f, read field by field: the other
    features (the JPEG bytes) are skipped over, not read."""
    while f.tell() < end:  # Example { Features features = 1 }
        number, size = _file_field(f)
        if number != 1:
            f.seek(size, os.SEEK_CUR)
            continue
        features_end = f.tell() + size
        while f.tell() < features_end:  # Features { map<string, Feature> feature = 1 }: entries {key = 1, value = 2}
            number, size = _file_field(f)
            entry_end, key, value = f.tell() + size, None, None
            while number == 1 and f.tell() < entry_end:
                field, length = _file_field(f)
                if field == 1:
                    key = f.read(length)
                elif field == 2 and key in (None, name):  # a value before its key is read: it may be the one
                    value = f.read(length)
                else:
                    f.seek(length, os.SEEK_CUR)
            f.seek(entry_end)
            if key == name and value is not None:
                return _feature_values(name.decode(), value)
    return None


def record_labels(path: Path, *, feature: str = "image/class/label") -> Iterator[int]:
    """The label of every record of one TFRecord file that has one, without reading the images."""
    with open(path, "rb") as f:
        while header := f.read(12):
            if len(header) < 12:
                raise ValueError(f"{path}: a record is truncated")
            (length,) = struct.unpack("<Q", header[:8])
            end = f.tell() + length
            values = _example_feature(f, end, feature.encode())
            f.seek(end + 4)  # past the data's checksum
            if values:
                yield int(values[0])


def label_range(root: Path, *, key: str = "data.path") -> tuple[int, str]:
    """(the classes a model needs for this TFRecord folder's labels, the largest label + 1; where that was
    read): dataset.json's label_base + num_classes, which the converter and synth write, else every
    record's label, read once (its images are skipped). `key` names the folder in errors."""
    manifest = root / MANIFEST
    if manifest.is_file():
        try:
            facts = json.loads(manifest.read_text())
            return int(facts.get("label_base", 0)) + int(facts["num_classes"]), f"{MANIFEST} (num_classes)"
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ConfigError(
                f"{key}={root}: {manifest.name} does not say num_classes ({type(error).__name__}: {error}); "
                f"fix it, or remove it to have the records' labels read"
            ) from None
    largest = -1
    for record, _ in find_tfrecords(root):
        try:
            largest = max(largest, max(record_labels(record), default=-1))
        except ValueError as error:
            raise ConfigError(f"{key}={root}: {error}; re-create the folder with 'ddlbench data convert'") from None
    return largest + 1, "record labels (the largest + 1)"


# --- datasets ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    path: Path
    label: int
    class_name: str


def list_imagefolder(root: Path) -> list[Sample]:
    """JPEGs of an ImageFolder in torchvision's order: sorted class folders, sorted files."""
    if not root.is_dir():
        raise ConfigError(
            f"--from {root} is not a directory; pass an ImageFolder (e.g. one 'ddlbench data synth' wrote)"
        )
    classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    samples = [
        Sample(root / name / file, label, name)
        for label, name in enumerate(classes)
        for file in sorted(os.listdir(root / name))
        if file.endswith(JPEG_SUFFIXES)
    ]
    if not samples:
        raise ConfigError(f"--from {root} holds no <class>/<image>.jpg files; pass an ImageFolder of JPEGs")
    return samples


def shard_name(index: int, num_shards: int) -> str:
    return f"train-{index:05d}-of-{num_shards:05d}"


def write_shard(
    record_path: Path,
    samples: list[Sample],
    *,
    jpeg_of: Callable[[Sample], bytes] | None = None,
    on_record: Callable[[], object] | None = None,
) -> None:
    """One TFRecord file of `samples` in this order, and its DALI index next to it (.idx)."""
    index_path = record_path.with_name(record_path.name[: -len(RECORD_SUFFIX)] + INDEX_SUFFIX)
    with open(record_path, "wb") as records, open(index_path, "w") as index:
        for sample in samples:
            jpeg = jpeg_of(sample) if jpeg_of is not None else sample.path.read_bytes()
            record = frame_record(
                encode_example(
                    {
                        "image/encoded": jpeg,
                        "image/class/label": sample.label,
                        "image/class/text": sample.class_name.encode(),
                    }
                )
            )
            index.write(f"{records.tell()} {len(record)}\n")
            records.write(record)
            if on_record is not None:
                on_record()


def write_tfrecords(
    samples: list[Sample],
    out: Path,
    *,
    num_shards: int,
    seed: int,
    progress: bool = True,
    jpeg_of: Callable[[Sample], bytes] | None = None,
) -> int:
    """Write out/train-*.tfrecord, their .idx DALI index files and dataset.json; refuses a non-empty
    `out`. Written into a temporary sibling and renamed, so a crash leaves no half dataset.
    `jpeg_of` makes a sample's JPEG bytes (synth); by default the sample's file is read."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} is not empty; choose a new folder (existing data is never overwritten)")
    if not 1 <= num_shards <= max(1, len(samples)):
        raise ConfigError(f"--shards={num_shards} must be between 1 and the number of images ({len(samples)})")
    order = np.random.default_rng(seed).permutation(len(samples)).tolist()
    tmp = out.with_name(f".{out.name}.partial{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    bounds = [len(order) * k // num_shards for k in range(num_shards + 1)]
    with tqdm(total=len(order), desc=f"tfrecord {out.name}", unit="img", disable=not progress) as bar:
        for shard in range(num_shards):
            name = shard_name(shard, num_shards)
            write_shard(
                tmp / (name + RECORD_SUFFIX),
                [samples[i] for i in order[bounds[shard] : bounds[shard + 1]]],
                jpeg_of=jpeg_of,
                on_record=bar.update,
            )
    classes = sorted({(s.label, s.class_name) for s in samples})
    (tmp / MANIFEST).write_text(
        json.dumps(
            {
                "format": "tfrecord",
                "num_records": len(samples),
                "num_shards": num_shards,
                "num_classes": len(classes),
                "classes": [name for _, name in classes],
                "label_base": 0,
                "features": {
                    "image/encoded": "bytes (JPEG)",
                    "image/class/label": "int64",
                    "image/class/text": "bytes",
                },
                "seed": seed,
            },
            indent=1,
        )
        + "\n"
    )
    if out.exists():
        out.rmdir()  # empty, checked above
    out.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, out)
    return len(samples)


def convert_imagefolder(src: Path, out: Path, *, num_shards: int, seed: int, progress: bool = True) -> int:
    """An ImageFolder of JPEGs -> TFRecord shards + DALI index files (the JPEG bytes are copied as is)."""
    return write_tfrecords(list_imagefolder(src), out, num_shards=num_shards, seed=seed, progress=progress)


def synth_tfrecords(
    out: Path,
    *,
    num_classes: int,
    images_per_class: int,
    width: int,
    height: int,
    quality: int,
    seed: int,
    num_shards: int,
    progress: bool = True,
) -> int:
    """The same images `ddlbench data synth` writes as JPEGs, straight into TFRecord shards."""
    import io

    from benchmarks.data.synth import class_image

    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} is not empty; choose a new folder (existing data is never overwritten)")
    for name, value, low, high in (
        ("--classes", num_classes, 1, 100_000),
        ("--per-class", images_per_class, 1, 10_000_000),
        ("--width", width, 8, 8192),
        ("--height", height, 8, 8192),
        ("--quality", quality, 1, 100),
    ):
        if not low <= value <= high:
            raise ConfigError(f"{name}={value} must be between {low} and {high}")

    def jpeg_of(sample: Sample) -> bytes:
        buf = io.BytesIO()
        image = class_image(
            sample.label, int(sample.path.stem), num_classes=num_classes, width=width, height=height, seed=seed
        )
        image.save(buf, format="JPEG", quality=quality)
        return buf.getvalue()

    samples = [
        Sample(Path(f"class_{class_id:05d}") / f"{index:07d}.jpg", class_id, f"class_{class_id:05d}")
        for class_id in range(num_classes)
        for index in range(images_per_class)
    ]
    return write_tfrecords(samples, out, num_shards=num_shards, seed=seed, progress=progress, jpeg_of=jpeg_of)


def find_tfrecords(root: Path) -> list[tuple[Path, Path]]:
    """(record file, index file) pairs of a folder, sorted by name; [] if there are none."""
    if not root.is_dir():
        return []
    records = sorted(p for p in root.iterdir() if p.name.endswith(RECORD_SUFFIX))
    return [(p, p.with_name(p.name[: -len(RECORD_SUFFIX)] + INDEX_SUFFIX)) for p in records]


def check_indexes(root: Path, pairs: list[tuple[Path, Path]]) -> None:
    """ConfigError naming the first record file without its DALI index, and how to write it."""
    for record, index in pairs:
        if not index.is_file():
            raise ConfigError(
                f"data.path={root}: {record.name} has no DALI index {index.name}; write it with "
                f"'tfrecord2idx {record} {index}' (or re-create the folder with 'ddlbench data convert')"
            )
