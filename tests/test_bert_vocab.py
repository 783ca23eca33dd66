"""BERT's uncased vocab.txt for notebook 1: found, downloaded and checked, or a clear error."""
from __future__ import annotations

import hashlib

import pytest

from data_helpers import bert_vocab_path
from minibert.data import bert_vocab
from minibert.data.bert_vocab import BERT_UNCASED_VOCAB_SHA256, bert_uncased_vocab


@pytest.fixture
def no_package(monkeypatch):
    """As for a student: no installed package ships the file."""
    monkeypatch.setattr(bert_vocab, "_PACKAGED", (("no_such_package_here", "vocab.txt"),))


def test_the_checksum_is_that_of_berts_file():
    assert hashlib.sha256(bert_vocab_path().read_bytes()).hexdigest() == BERT_UNCASED_VOCAB_SHA256


def test_a_download_is_checked_moved_into_place_and_found_again(tmp_path, no_package):
    source = bert_vocab_path()
    got = bert_uncased_vocab(data_dir=tmp_path, urls=(source.as_uri(),))
    assert got == tmp_path / "bert-base-uncased" / "vocab.txt"
    assert got.read_bytes() == source.read_bytes()
    assert [p.name for p in got.parent.iterdir()] == ["vocab.txt"]          # no partial file left
    # found in the data folder the next time, without asking any address
    assert bert_uncased_vocab(data_dir=tmp_path, urls=("file:///nowhere/vocab.txt",)) == got


def test_a_wrong_file_is_refused_and_the_next_address_tried(tmp_path, no_package):
    wrong = tmp_path / "other.txt"
    wrong.write_text("[PAD]\n[UNK]\n")
    got = bert_uncased_vocab(data_dir=tmp_path / "data", urls=(wrong.as_uri(), bert_vocab_path().as_uri()))
    assert hashlib.sha256(got.read_bytes()).hexdigest() == BERT_UNCASED_VOCAB_SHA256
    with pytest.raises(OSError, match=r"wrong SHA-256.*copy a vocab.txt with SHA-256 07eced37"):
        bert_uncased_vocab(data_dir=tmp_path / "elsewhere", urls=(wrong.as_uri(),))
    assert not list((tmp_path / "elsewhere" / "bert-base-uncased").iterdir())


def test_offline_it_says_where_to_put_the_file(tmp_path, no_package):
    with pytest.raises(OSError, match=r"could not download BERT's uncased vocab.txt .*copy a vocab.txt") as e:
        bert_uncased_vocab(data_dir=tmp_path, urls=("http://127.0.0.1:9/vocab.txt",), timeout=5)
    assert str(tmp_path / "bert-base-uncased" / "vocab.txt") in str(e.value)
    with pytest.raises(FileNotFoundError, match="download=True"):
        bert_uncased_vocab(data_dir=tmp_path, download=False)


def test_a_damaged_copy_in_the_data_folder_is_not_used(tmp_path, no_package):
    damaged = tmp_path / "bert-base-uncased" / "vocab.txt"
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(bert_vocab_path().read_bytes()[:-10])
    got = bert_uncased_vocab(data_dir=tmp_path, urls=(bert_vocab_path().as_uri(),))
    assert got == damaged and hashlib.sha256(got.read_bytes()).hexdigest() == BERT_UNCASED_VOCAB_SHA256


def test_the_test_package_copy_is_used_when_installed(tmp_path):
    assert bert_uncased_vocab(data_dir=tmp_path, download=False) == bert_vocab_path()
