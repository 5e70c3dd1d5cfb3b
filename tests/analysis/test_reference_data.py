"""The seed studies' numbers (analysis/reference/claims.csv) and exhibits (analysis/reference/exhibits.csv): the
files parse with their columns, and, where the studies' texts are at hand (development only), every quote is
found in its study's text and holds the value as printed."""

from __future__ import annotations

import csv
import fnmatch
import re
import tomllib
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "analysis" / "reference"
SEEDS = ROOT.parent / "shared" / "seeds"  # the texts as we have them; the shipped package never reads them
SEED_FILES = {
    "stash2021": "000_96a7e6e6cd815dc4.txt",
    "aach2023": "001_6458dff861aadb00.txt",
    "composable2023": "002_00c6de68ca908b41.txt",
}
CLAIM_COLUMNS = ["study", "key", "value", "unit", "bound", "place", "quote"]
EXHIBIT_COLUMNS = ["study", "exhibit", "kind", "title", "shows", "quote"]
NOT_IN_COPY = "not in our copy of the text"
# numbers the texts write as words ("almost twice", "half the number of GPUs", "over one million ... files")
NUMBER_WORDS = {
    "one million": 1_000_000.0,
    "single": 1.0,
    "one": 1.0,
    "two": 2.0,
    "twice": 2.0,
    "doubling": 2.0,
    "second": 2.0,
    "half": 0.5,
    "three": 3.0,
    "four": 4.0,
    "eight": 8.0,
    "sixteen": 16.0,
}


def _rows(name: str) -> tuple[list[str], list[dict[str, str]]]:
    with open(REFERENCE / name, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


@cache
def claims() -> list[dict[str, str]]:
    return _rows("claims.csv")[1]


@cache
def exhibits() -> list[dict[str, str]]:
    return _rows("exhibits.csv")[1]


def _normalise(text: str) -> str:
    return " ".join(text.split())


def _claim(study: str, key: str) -> dict[str, str]:
    (row,) = [r for r in claims() if r["study"] == study and r["key"] == key]
    return row


def test_columns_are_exactly_these():
    assert _rows("claims.csv")[0] == CLAIM_COLUMNS
    assert _rows("exhibits.csv")[0] == EXHIBIT_COLUMNS


def test_claims_are_well_formed():
    seen = set()
    for row in claims():
        where = f"claims.csv {row['study']}/{row['key']}"
        assert row["study"] in SEED_FILES, where
        assert re.fullmatch(r"[a-z][a-z0-9_]*", row["key"]), where
        assert (row["study"], row["key"]) not in seen, f"{where}: key repeated"
        seen.add((row["study"], row["key"]))
        assert row["bound"] in {"=", "<", ">", "~"}, where
        assert row["unit"] and row["place"], where
        if row["unit"] == "version":
            assert re.fullmatch(r"\d+(\.\d+)+", row["value"]), where
        else:
            float(row["value"])  # a number, without thousands separators
        assert 5 <= len(row["quote"].split()) <= 25, f"{where}: a quote is 5 to 25 words"
    assert {r["study"] for r in claims()} == set(SEED_FILES)


def test_exhibits_are_well_formed():
    seen = set()
    for row in exhibits():
        where = f"exhibits.csv {row['study']}/{row['exhibit']}"
        assert row["study"] in SEED_FILES, where
        assert row["kind"] in {"figure", "table"}, where
        assert (row["study"], row["exhibit"]) not in seen, f"{where}: exhibit repeated"
        seen.add((row["study"], row["exhibit"]))
        assert row["shows"], where
        # an exhibit the numbering implies but the text never cites has no words to quote
        assert bool(row["quote"]) == (row["shows"] != NOT_IN_COPY), where
    assert {r["study"] for r in exhibits()} == set(SEED_FILES)


def test_the_exhibits_the_texts_cite_are_all_there():
    ids = {(r["study"], r["exhibit"]) for r in exhibits()}
    stash = [f"Figure {n}" for n in "4(a) 4(b) 5 6 7 8(a) 8(b) 9 10 11 12 13 14 15 16 19 20".split()]
    composable = [f"Figure {n}" for n in (6, 7, 9, 10, 11, 12, 13, 14, 16)] + ["Figure (software optimizations)"]
    expected = {("stash2021", e) for e in stash + ["Table 1", "Table 2"]}
    expected |= {("composable2023", e) for e in composable + ["Table I", "Table III", "Table IV"]}
    expected |= {("aach2023", e) for e in ["Throughput vs GPUs", "Speedup", "Efficiency", "LR annealing accuracy"]}
    expected |= {("aach2023", f"Breakdown table {t}") for t in ["(a) ResNet50", "(b) ResNet101", "(c) ResNet152"]}
    assert expected <= ids, sorted(expected - ids)


def test_spot_checks():
    assert _claim("aach2023", "comm_pct_native_resnet50_512gpus")["value"] == "82.61"
    assert _claim("aach2023", "version_pytorch")["value"] == "1.11.0"
    traffic = _claim("composable2023", "pcie_traffic_gb_s_bert_large_falcon")
    assert (traffic["value"], traffic["unit"], traffic["bound"]) == ("76.43", "gb_s", "=")
    assert _claim("composable2023", "batch_size_bert_large")["value"] == "48"
    assert _claim("composable2023", "epochs_bert_large")["value"] == "2"
    stall = _claim("stash2021", "network_stall_pct_max_p3_8xlarge_x2")
    assert (stall["value"], stall["unit"]) == ("500", "pct")
    assert "as high as 500%" in stall["quote"]
    assert _claim("composable2023", "slowdown_pct_mobilenetv2_resnet50_falcon")["bound"] == "<"
    assert _claim("composable2023", "relative_time_bert_large_falcon")["bound"] == "~"


def _holds_value(quote: str, value: str) -> bool:
    """The value as printed in the quote (digits not part of a longer number; 65,536 read as 65536), or a
    number word of the quote that means it."""
    digits = re.sub(r"(?<=\d),(?=\d{3}\b)", "", quote)
    if re.search(rf"(?<![\d.]){re.escape(value)}(?!\.?\d)", digits):
        return True
    words = [w for w, n in NUMBER_WORDS.items() if n == float(value)] if re.fullmatch(r"[\d.]+", value) else []
    return any(re.search(rf"\b{w}\b", quote, re.IGNORECASE) for w in words)


def test_every_quote_is_in_its_study_and_holds_its_value():
    """A development-time check: the studies' texts are not shipped."""
    if not SEEDS.is_dir():
        pytest.skip("the seed texts are not here (a development-time check)")
    texts = {study: _normalise((SEEDS / name).read_text(encoding="utf-8")) for study, name in SEED_FILES.items()}
    for row in claims():
        where = f"claims.csv {row['study']}/{row['key']}"
        assert _normalise(row["quote"]) in texts[row["study"]], f"{where}: quote not in the text"
        assert _holds_value(row["quote"], row["value"]), f"{where}: {row['value']} not in its quote"
    for row in exhibits():
        if row["quote"]:
            where = f"exhibits.csv {row['study']}/{row['exhibit']}"
            assert _normalise(row["quote"]) in texts[row["study"]], f"{where}: quote not in the text"


def test_the_package_ships_the_reference_csvs():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["analysis"]
    for name in ["aach2023_breakdown.csv", "claims.csv", "exhibits.csv"]:
        assert any(fnmatch.fnmatch(f"reference/{name}", p) for p in patterns), name
