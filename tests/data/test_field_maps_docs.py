"""docs/evaluation.md's field-mapping table has a row for every name in ``FIELD_MAPS``."""

from pathlib import Path

from rlvr.data import FIELD_MAPS

DOC = (Path(__file__).resolve().parents[2] / "docs" / "evaluation.md").read_text()


def test_every_field_map_is_in_the_docs_table():
    table = DOC.split("| name | dataset (split) | prompt | answer | id |", 1)[1].split("\n\n", 1)[0]
    missing = [name for name in FIELD_MAPS if f"| `{name}` |" not in table]
    assert not missing, f"docs/evaluation.md's field-mapping table lacks {missing}"
