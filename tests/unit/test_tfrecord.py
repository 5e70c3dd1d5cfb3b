"""The TensorFlow-free TFRecord writer: CRC-32C and its masking, the tf.train.Example wire format,
record framing, DALI index files, and the `ddlbench data` commands that use them."""

from __future__ import annotations

import json
import struct

import pytest

from benchmarks.data import tfrecord as tfr
from benchmarks.errors import ConfigError


def test_crc32c_known_values():
    # the CRC-32C check value (RFC 3720 B.4 / the Castagnoli catalogue) and RFC 3720's 32 zero bytes
    assert tfr.crc32c_python(b"123456789") == 0xE3069283
    assert tfr.crc32c_python(bytes(32)) == 0x8A9136AA
    assert tfr.crc32c(b"123456789") == 0xE3069283  # the fast one, when installed, agrees


def test_masked_crc_is_tensorflows_rotation_plus_constant():
    assert tfr.masked_crc32c(b"") == 0xA282EAD8  # crc 0 -> the constant alone
    crc = 0xE3069283
    assert tfr.masked_crc32c(b"123456789") == ((crc >> 15 | crc << 17) + 0xA282EAD8) & 0xFFFFFFFF


def test_example_bytes_are_the_protobuf_tensorflow_writes():
    # Example{features{feature{key:"a" value{int64_list{value:[1]}}}}}, packed as proto3 does
    assert tfr.encode_example({"a": 1}) == bytes.fromhex("0a0c0a0a0a016112051a030a0101")
    # bytes_list: Feature.bytes_list = 1 { value = 1 }
    assert tfr.encode_example({"b": b"xy"}) == bytes.fromhex("0a0d0a0b0a016212060a040a027879")


def test_example_round_trip():
    features = {
        "image/encoded": b"\xff\xd8" + bytes(range(256)) * 40,
        "image/class/label": 999,
        "image/class/text": b"class_00999",
        "neg": [-1, 0, 2**40],
    }
    decoded = tfr.decode_example(tfr.encode_example(features))
    assert decoded == {
        "image/encoded": [features["image/encoded"]],
        "image/class/label": [999],
        "image/class/text": [b"class_00999"],
        "neg": [-1, 0, 2**40],
    }


def test_record_framing_round_trip_and_corruption(tmp_path):
    records = [b"", b"one", bytes(1000)]
    path = tmp_path / "x.tfrecord"
    path.write_bytes(b"".join(tfr.frame_record(r) for r in records))
    assert list(tfr.read_records(path)) == records
    first = tfr.frame_record(b"one")
    assert struct.unpack("<Q", first[:8])[0] == 3 and len(first) == 8 + 4 + 3 + 4
    data = bytearray(path.read_bytes())
    data[12 + 4 + 12 + 1] ^= 0xFF  # a byte of record 1's data ("one")
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="record 1 has a bad data checksum"):
        list(tfr.read_records(path))


def _imagefolder(root, classes=2, per_class=3):
    from benchmarks.data.synth import synth_imagefolder

    synth_imagefolder(
        root, num_classes=classes, images_per_class=per_class, width=24, height=16, quality=80, seed=0, progress=False
    )
    return root


def test_convert_writes_every_image_once_with_its_label_and_a_dali_index(tmp_path):
    src = _imagefolder(tmp_path / "jpg")
    out = tmp_path / "tfr"
    assert tfr.convert_imagefolder(src, out, num_shards=2, seed=0, progress=False) == 6
    pairs = tfr.find_tfrecords(out)
    assert [p.name for p, _ in pairs] == ["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"]
    seen = {}
    for record_path, index_path in pairs:
        blob = record_path.read_bytes()
        offset = 0
        index = [tuple(map(int, line.split())) for line in index_path.read_text().splitlines()]
        for (start, size), data in zip(index, tfr.read_records(record_path), strict=True):
            assert start == offset and size == len(data) + 16  # what DALI's tfrecord2idx writes
            assert tfr.frame_record(data) == blob[start : start + size]
            offset += size
            example = tfr.decode_example(data)
            seen[example["image/encoded"][0]] = (example["image/class/label"][0], example["image/class/text"][0])
        assert offset == len(blob)
    expected = {p.read_bytes(): (int(p.parent.name[-5:]), p.parent.name.encode()) for p in src.glob("*/*.jpg")}
    assert seen == expected
    manifest = json.loads((out / "dataset.json").read_text())
    assert (manifest["num_records"], manifest["num_classes"], manifest["label_base"]) == (6, 2, 0)


def test_convert_never_overwrites(tmp_path):
    src = _imagefolder(tmp_path / "jpg")
    out = tmp_path / "tfr"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="is not empty; choose a new folder"):
        tfr.convert_imagefolder(src, out, num_shards=1, seed=0, progress=False)
    assert (out / "keep.txt").read_text() == "mine" and len(list(out.iterdir())) == 1


def test_convert_rejects_a_folder_without_jpegs(tmp_path):
    (tmp_path / "empty" / "class_a").mkdir(parents=True)
    with pytest.raises(ConfigError, match="holds no <class>/<image>.jpg files"):
        tfr.convert_imagefolder(tmp_path / "empty", tmp_path / "out", num_shards=1, seed=0, progress=False)


def test_cli_synth_tfrecord_equals_convert_of_synth_jpeg(tmp_path, cli):
    args = ["--classes", "2", "--per-class", "3", "--width", "24", "--height", "16", "--quiet"]
    for argv in (
        ["data", "synth", "--out", str(tmp_path / "jpg"), *args],
        ["data", "synth", "--format", "tfrecord", "--shards", "2", "--out", str(tmp_path / "direct"), *args],
        [
            "data",
            "convert",
            "--from",
            str(tmp_path / "jpg"),
            "--out",
            str(tmp_path / "converted"),
            "--shards",
            "2",
            "--quiet",
        ],
    ):
        result = cli(*argv)
        assert result.returncode == 0, result.stderr
    for name in ("train-00000-of-00002.tfrecord", "train-00001-of-00002.idx"):
        assert (tmp_path / "direct" / name).read_bytes() == (tmp_path / "converted" / name).read_bytes()
    again = cli("data", "convert", "--from", str(tmp_path / "jpg"), "--out", str(tmp_path / "converted"))
    assert again.returncode == 2 and again.stderr.strip().endswith("(existing data is never overwritten)")


def test_pure_python_crc_frames_the_same_records(monkeypatch):
    data = bytes(range(256)) * 5
    fast = tfr.frame_record(data)
    monkeypatch.setattr(tfr, "crc32c", tfr.crc32c_python)  # what a machine without the crc32c package uses
    assert tfr.frame_record(data) == fast
