"""The results table of ``powerzoo score`` (``append_result``): rows added under one header, an
older table's header brought up to date, a foreign file refused."""

import csv

import pytest

from powerzoo.benchmarks.submission_score import RESULT_COLUMNS, append_result


def _row(algorithm: str) -> dict:
    row = dict.fromkeys(RESULT_COLUMNS)
    row.update(
        task="dso",
        algorithm=algorithm,
        mean_return=-616.0234,
        max_cost_ratio=0.873,
        max_cost_ratio_ci_high=1.94,
        run_performance=[0.7, 1.04],
    )
    return row


def _read(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_rows_are_added_under_one_header(tmp_path):
    table = tmp_path / "results.csv"
    append_result(table, _row("A"))
    append_result(table, _row("B"))
    rows = _read(table)
    assert [r["algorithm"] for r in rows] == ["A", "B"]
    assert list(rows[0]) == list(RESULT_COLUMNS)
    assert rows[1]["mean_return"] == "-616.0234" and rows[1]["run_performance"] == "[0.7, 1.04]"


def test_an_older_table_gains_the_new_columns_and_keeps_its_cells(tmp_path):
    table = tmp_path / "results.csv"
    old = [c for c in RESULT_COLUMNS if not c.startswith("max_cost_ratio_ci")]
    with open(table, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=old, lineterminator="\n")
        writer.writeheader()
        writer.writerow({"task": "dso", "algorithm": "OLD", "mean_return": "-1.5e+02"})
    append_result(table, _row("NEW"))
    rows = _read(table)
    assert list(rows[0]) == list(RESULT_COLUMNS)
    assert rows[0]["algorithm"] == "OLD" and rows[0]["mean_return"] == "-1.5e+02"  # as written
    assert rows[0]["max_cost_ratio_ci_high"] == ""  # not measured then
    assert rows[1]["algorithm"] == "NEW" and rows[1]["max_cost_ratio_ci_high"] == "1.94"


def test_a_file_with_other_columns_is_refused_and_left_alone(tmp_path):
    table = tmp_path / "results.csv"
    table.write_text("task,score\ndso,1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not those of a results table"):
        append_result(table, _row("A"))
    assert table.read_text(encoding="utf-8") == "task,score\ndso,1\n"
    shuffled = tmp_path / "shuffled.csv"  # today's columns in another order: not an older table
    shuffled.write_text(",".join(reversed(RESULT_COLUMNS)) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not those of a results table"):
        append_result(shuffled, _row("A"))
