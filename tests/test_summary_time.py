"""The terminal summary's ``time (s)`` column: a record's ``total`` where it has one (GLUE's timings hold
``train``, ``eval`` and their ``total``: summing all three showed 4,398.9 s for a 2,200.7 s run), else the sum of
its parts (a retrieval record's load, encode, search and metrics)."""

from __future__ import annotations

from harness.core.console import format_summary, seconds
from harness.core.results import ResultRecord


def record(task: str, timings: dict[str, float]) -> ResultRecord:
    return ResultRecord(task=task, dataset="stsb", split="validation", model={"name": "m"}, metrics={"score": 84.8},
                        main_score="score", run_id="r1", timings=timings)


def time_column(rec: ResultRecord) -> str:
    header, _, row = format_summary([rec]).splitlines()[:3]
    return row.split()[header.split().index("time")]


def test_a_record_with_a_total_shows_its_total() -> None:
    rec = record("glue", {"train": 2100.0, "eval": 98.2, "total": 2200.7})
    assert seconds(rec.timings) == 2200.7
    assert time_column(rec) == "2200.7"


def test_a_record_of_parts_shows_their_sum() -> None:
    rec = record("beir", {"load_s": 1.25, "encode_s": 10.0, "search_s": 2.5, "metrics_s": 0.25})
    assert time_column(rec) == "14.0"
    assert time_column(record("beir", {})) == "-"
