"""GLUE's files fetched once and checked (download.py), with file:// addresses standing in for GLUE's hosts:
a task's zip unpacked into GLUE's folder, MRPC built from Microsoft's files as GLUE builds it, a file that is
not the one recorded refused, and no network one line that says where to put the files."""
import hashlib
import io
import zipfile

import pytest

from minibert.finetune import download as dl
from minibert.finetune import glue


def recorded(monkeypatch, task, data: bytes, path):
    path.write_bytes(data)
    monkeypatch.setitem(dl.ZIPS, task, (dl.ZIPS[task][0], len(data), hashlib.sha256(data).hexdigest(), "t"))
    monkeypatch.setattr(dl, "urls", lambda t: ["file:///nonexistent/first/address", path.as_uri()])


def zipped(files: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return buffer.getvalue()


def test_a_tasks_zip_is_fetched_checked_and_unpacked_into_glues_folder(tmp_path, monkeypatch):
    data = zipped({"RTE/train.tsv": "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tentailment\n",
                   "RTE/dev.tsv": "index\tsentence1\tsentence2\tlabel\n0\tC.\tD.\tnot_entailment\n",
                   "RTE/original/raw/in_domain_train.tsv": "deeper: not the task's own\n"})
    recorded(monkeypatch, "rte", data, tmp_path / "served.zip")
    folder = dl.download("rte", tmp_path / "data")
    assert folder == tmp_path / "data" / "RTE" and sorted(p.name for p in folder.iterdir()) == ["dev.tsv", "train.tsv"]
    assert glue.read_split(glue.task("rte"), folder / "dev.tsv").text_b == ["D."]


def test_another_file_at_the_address_is_refused_and_nothing_is_written(tmp_path, monkeypatch):
    recorded(monkeypatch, "wnli", zipped({"WNLI/train.tsv": "x\n"}), tmp_path / "served.zip")
    (tmp_path / "served.zip").write_bytes(zipped({"WNLI/train.tsv": "changed\n"}))
    with pytest.raises(ValueError, match="expected .* bytes"):
        dl.download("wnli", tmp_path / "data")
    assert not (tmp_path / "data" / "WNLI").exists()


def test_without_a_network_one_line_says_where_the_files_go(tmp_path, monkeypatch):
    monkeypatch.setattr(dl, "urls", lambda t: ["file:///nonexistent/a.zip"])
    with pytest.raises(OSError) as err:
        dl.download("sst2", tmp_path / "data")
    message = str(err.value)
    assert "\n" not in message and f"put the task's files (train.tsv, dev.tsv, ...) in {tmp_path / 'data' / 'SST-2'}" in message


def test_mrpc_is_built_from_microsofts_files_as_glue_builds_it(tmp_path, monkeypatch):
    head = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    files = {"train": head + "1\t11\t12\tA b.\tA c.\n0\t21\t22\tD e.\tF g.\n1\t31\t32\tH i.\tH j.\n",
             "test": head + "1\t41\t42\tK l.\tK m.\n0\t51\t52\tN o.\tP q.\n",
             "dev_ids": "21\t22\n"}
    for part, text in files.items():
        path = tmp_path / part
        path.write_text(text, encoding="utf-8")
        data = path.read_bytes()
        monkeypatch.setitem(dl.MRPC, part, (path.as_uri(), len(data), hashlib.sha256(data).hexdigest()))
    folder = dl.download("mrpc", tmp_path / "data")
    mrpc = glue.task("mrpc")
    train, dev = glue.read_split(mrpc, folder / "train.tsv"), glue.read_split(mrpc, folder / "dev.tsv")
    test = glue.read_split(mrpc, folder / "test.tsv", test=True)
    assert (train.text_a, list(train.labels)) == (["A b.", "H i."], [1, 1])
    assert (dev.text_a, dev.text_b, list(dev.labels)) == (["D e."], ["F g."], [0])
    assert (test.ids, test.text_b) == (["0", "1"], ["K m.", "P q."])
