"""``notebooks/reanalysis.ipynb`` runs top to bottom on the installed package and is committed
without outputs."""

import nbformat
import pytest
from nbclient import NotebookClient

from support import REPO

NOTEBOOK = REPO / "notebooks" / "reanalysis.ipynb"


def test_notebook_is_committed_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)


def test_notebook_imports_only_the_public_api():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "qualgate." in source and "._" not in source


@pytest.mark.slow
def test_notebook_runs_top_to_bottom(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "retention_printed: fly/standard reproduces 6 of 7" in text
    images = sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    assert images == 3


def test_notebook_says_at_the_top_which_table_it_analyses_and_why_not_the_pooled_one():
    import csv

    nb = nbformat.read(NOTEBOOK, as_version=4)
    top = nb.cells[0].source
    assert nb.cells[0].cell_type == "markdown"
    assert "11-cell V1" in top and "32-cell V2" in top and "not published" in top
    assert "1.68 / 1.80 points, 3,424 answers" in top
    # the counts behind that sentence: 11 V1 cells with counts, 32 V2 cells without
    data = REPO / "qualgate" / "data" / "published"
    v1 = list(csv.DictReader((data / "fly_pr53987_v1_eval.csv").open()))
    v2 = list(csv.DictReader((data / "fly_pr53987_v2_accuracy_layout.csv").open()))
    assert len(v1) == 11 and len(v2) == 32
    assert all(r["value_status"] == "not_found" and not r["fly_correct"] for r in v2)
