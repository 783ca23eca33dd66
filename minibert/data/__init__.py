"""The data pipeline in one import: corpora, tokenized-corpus cache, NSP instances, MLM batches.

Typical use::

    from minibert.data.tokenizer import WordPieceTokenizer
    from minibert.data import builtin_corpus, build_pretraining_dataset

    tokenizer = WordPieceTokenizer.from_vocab_file("vocab.txt")
    data = build_pretraining_dataset(builtin_corpus(), tokenizer, max_seq_length=128, seed=0)
    for batch in data.batches(batch_size=32, epoch=0):
        out = model.forward(**batch)      # input_ids, token_type_ids, attention_mask, mlm_labels, nsp_labels

The pieces live in smaller modules: :mod:`minibert.data.corpus` (documents and
readers), :mod:`minibert.data.builtin`, :mod:`minibert.data.wikitext`,
:mod:`minibert.data.token_cache` and :mod:`minibert.data.pretraining_data`.
"""
from .builtin import builtin_corpus, default_cache_dir
from .corpus import Corpus, load_corpus, read_bert_format, read_plain_text, split_sentences
from ..constants import IGNORE_INDEX
from .instances import (TrainingInstance, create_instances_from_document, create_training_instances,
                        truncate_seq_pair)
from .masking import MaskedTokens, mask_tokens
from .pretraining_data import PretrainingDataset, build_pretraining_dataset
from .token_cache import TokenizedCorpus, tokenize_corpus
from .wikitext import (WIKITEXT2_SPLITS, WIKITEXT2_URL, default_data_dir, download_wikitext2,
                       find_wikitext2, load_wikitext2, parse_wikitext)

__all__ = [
    "Corpus", "load_corpus", "read_bert_format", "read_plain_text", "split_sentences",
    "builtin_corpus", "default_cache_dir",
    "WIKITEXT2_URL", "WIKITEXT2_SPLITS", "default_data_dir", "download_wikitext2", "find_wikitext2",
    "load_wikitext2", "parse_wikitext",
    "TokenizedCorpus", "tokenize_corpus",
    "TrainingInstance", "MaskedTokens", "PretrainingDataset", "IGNORE_INDEX",
    "create_training_instances", "create_instances_from_document", "truncate_seq_pair",
    "mask_tokens", "build_pretraining_dataset",
]
