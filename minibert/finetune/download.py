"""GLUE's task files, fetched once into the data folder and checked, as WikiText-2 is.

Each task but MRPC is one zip (the GLUE benchmark's own, mirrored by Facebook AI; the original address
second), checked against the size and SHA-256 that TensorFlow Datasets records for it.  MRPC is built as
GLUE's download script builds it, from Microsoft's two files and GLUE's list of development pairs:
``train.tsv`` the training pairs not in that list, ``dev.tsv`` those in it, ``test.tsv`` the test pairs
with an index in place of the label.  Files land in ``DATA_DIR/<GLUE's folder>/`` only once every check
has passed; without a network, one line says where to put them.
"""
from __future__ import annotations

import io
import os
import shutil
import tempfile
import urllib.request
import zipfile
from pathlib import Path

from ..data.wikitext import sha256_file
from . import glue

MIRROR = "https://dl.fbaipublicfiles.com/glue/data/"
ORIGINAL = "https://firebasestorage.googleapis.com/v0/b/mtl-sentence-representations.appspot.com/o/data%2F"
# task -> (the zip's name, its size in bytes, its SHA-256, the original address's token)
ZIPS = {
    "cola": ("CoLA.zip", 376971, "f212fcd832b8f7b435fb991f101abf89f96b933ab400603bf198960dfc32cbff",
             "46d5e637-3411-4188-bc44-5809b5bfb5f4"),
    "sst2": ("SST-2.zip", 7439277, "d67e16fb55739c1b32cdce9877596db1c127dc322d93c082281f64057c16deaa",
             "aabc5f6b-e466-44a2-b9b4-cf6337f84ac8"),
    "stsb": ("STS-B.zip", 802872, "e60a6393de5a8b5b9bac5020a1554b54e3691f9d600b775bd131e613ac179c85",
             "bddb94a7-8706-4e0d-a694-1109e12273b5"),
    "qqp": ("QQP.zip", 60534884, "67cb8f5fe66c90a0bc1bf5792e3924f63008b064ab7a473736c919d20bb140ad",
            "700c6acf-160d-4d89-81d1-de4191d02cb5"),
    "mnli": ("MNLI.zip", 312783507, "e7c1d896d26ed6caf700110645df426cc2d8ebf02a5ab743d5a5c68ac1c83633",
             "50329ea1-e339-40e2-809c-10c40afff3ce"),
    "qnli": ("QNLIv2.zip", 10627589, "e634e78627a29adaecd4f955359b22bf5e70f2cbd93b493f2d624138a0c0e5f5",
             "6fdcf570-0fc5-4631-8456-9505272d1601"),
    "rte": ("RTE.zip", 697150, "6bf86de103ecd335f3441bd43574d23fef87ecc695977a63b82d5efb206556ee",
            "5efa7e85-a0bb-4f19-8ea2-9e1840f077fb"),
    "wnli": ("WNLI.zip", 28999, "ae0e8e4d16f4d46d4a0a566ec7ecceccfd3fbfaa4a7a4b4e02848c0f2561ac46",
             "068ad0a0-ded7-4bd7-99a5-5e00222e0faf"),
}
# MRPC: (address, size, SHA-256) of Microsoft's training and test pairs and of GLUE's development ids
MRPC = {
    "train": ("https://dl.fbaipublicfiles.com/senteval/senteval_data/msr_paraphrase_train.txt", 1047044,
              "60a9b09084528f0673eedee2b69cb941920f0b8cd0eeccefc464a98768457f89"),
    "test": ("https://dl.fbaipublicfiles.com/senteval/senteval_data/msr_paraphrase_test.txt", 441275,
             "a04e271090879aaba6423d65b94950c089298587d9c084bf9cd7439bd785f784"),
    "dev_ids": (ORIGINAL + "mrpc_dev_ids.tsv?alt=media&token=ec5c0836-31d5-48f4-b431-7480817f1adc", 6222,
                "971d7767d81b997fd9060ade0ec23c4fc31cbb226a55d1bd4a1bac474eb81dc7"),
}


def urls(task: str) -> list[str]:
    name, _, _, token = ZIPS[task]
    return [MIRROR + name, f"{ORIGINAL}{name}?alt=media&token={token}"]


def fetch(addresses: list[str], size: int, sha256: str, dest: Path, timeout: float) -> None:
    """The first of ``addresses`` whose file has this size and SHA-256, written to ``dest``; else OSError
    (no address answered) or ValueError (an answer was another file), naming what was tried."""
    failures = []
    for url in addresses:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response, open(dest, "wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
        except OSError as exc:                  # URLError, HTTPError and socket errors are all OSErrors
            failures.append(f"{url}: {exc}")
            continue
        if dest.stat().st_size == size and sha256_file(dest) == sha256:
            return
        failures.append(f"{url}: {dest.stat().st_size} bytes, SHA-256 {sha256_file(dest)} (expected {size} "
                        f"bytes, {sha256})")
    error = ValueError if any("SHA-256" in f for f in failures) else OSError
    raise error("; ".join(failures))


def download(task: str, data_dir: Path, timeout: float = 60.0) -> Path:
    """Fetch ``task``'s files into ``data_dir``/<GLUE's folder>; returns that folder."""
    data_dir = Path(data_dir)
    target = data_dir / glue.task(task).folder
    data_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=data_dir, prefix=".download-") as tmp:
        tmp = Path(tmp)
        try:
            files = _mrpc(tmp, timeout) if task == "mrpc" else _unzipped(task, tmp, timeout)
        except OSError as exc:
            raise OSError(f"could not download GLUE's {task} ({exc}). Without a network, put the task's files "
                          f"(train.tsv, dev.tsv, ...) in {target}, or pass --data-dir a folder that has them") from None
        target.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (tmp / f".{name}").write_bytes(data)
            os.replace(tmp / f".{name}", target / name)
    return target


def _unzipped(task: str, tmp: Path, timeout: float) -> dict:
    name, size, sha256, _ = ZIPS[task]
    fetch(urls(task), size, sha256, tmp / name, timeout)
    with zipfile.ZipFile(tmp / name) as z:
        # the task's own files, folder/name.tsv (not the original data some zips also hold, deeper down)
        return {Path(m).name: z.read(m) for m in z.namelist() if m.endswith(".tsv") and len(Path(m).parts) == 2}


def _mrpc(tmp: Path, timeout: float) -> dict:
    text = {}
    for part, (url, size, sha256) in MRPC.items():
        fetch([url], size, sha256, tmp / part, timeout)
        text[part] = (tmp / part).read_text(encoding="utf-8-sig").splitlines()
    dev_ids = {tuple(line.strip().split("\t")) for line in text["dev_ids"] if line.strip()}
    header, rows = text["train"][0], [line.split("\t") for line in text["train"][1:] if line.strip()]
    train = [r for r in rows if (r[1], r[2]) not in dev_ids]
    dev = [r for r in rows if (r[1], r[2]) in dev_ids]
    test = [line.split("\t") for line in text["test"][1:] if line.strip()]
    out = io.StringIO()
    out.write("index\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
    out.writelines(f"{i}\t{r[1]}\t{r[2]}\t{r[3]}\t{r[4]}\n" for i, r in enumerate(test))
    as_tsv = lambda rows: (header + "\n" + "".join("\t".join(r) + "\n" for r in rows)).encode()  # noqa: E731
    return {"train.tsv": as_tsv(train), "dev.tsv": as_tsv(dev), "test.tsv": out.getvalue().encode()}
