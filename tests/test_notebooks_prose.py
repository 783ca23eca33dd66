"""Numbers quoted in the notebooks' prose are the numbers their outputs print.

Several notebooks discuss their own results in Markdown ("layer 1, head 1 puts 0.47 of its
weight on the previous token"). nbval re-runs a notebook and compares its outputs with the
committed ones, but nothing compares those outputs with the text around them: a notebook run
again after a change could print new numbers under old prose. These checks read the committed
files (no kernel): each claim takes numbers from one code cell's printed output, the cell found
by a marker string in it, and names phrases that the notebook's Markdown must contain with those
numbers filled in. Whitespace and line breaks do not matter.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_notebooks_meta import text_of

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NUM = r"(-?\d+\.\d+)"


def load(name):
    cells = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))["cells"]
    outputs = ["\n".join(text_of(o) for o in c.get("outputs", [])) for c in cells if c["cell_type"] == "code"]
    prose = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return outputs, " ".join(prose.split())


def output_with(outputs, marker):
    found = [o for o in outputs if marker in o]
    assert len(found) == 1, f"{len(found)} code cells print {marker!r}; expected exactly one"
    return found[0]


def numbers(text, pattern):
    """The numbers (as printed) that the groups of `pattern` capture in `text`, one line."""
    match = re.search(pattern, text, re.MULTILINE)
    assert match, f"no output line matches {pattern!r}"
    return match.groups()


def row(text, label, n):
    """The first n numbers printed after `label` at the start of a line."""
    return numbers(text, r"^\s*" + re.escape(label) + r"\s+" + r"\s+".join([NUM] * n))


def span(values):
    """'a to b' as the prose writes a range: smallest and largest, as printed."""
    ordered = sorted(values, key=float)
    return ordered[0], ordered[-1]


# ------------------------------------------------------------------ 03 attention
def claims_03(outputs):
    t = output_with(outputs, "mean weight on the key(s) that are")
    cols = ["entropy", "previous", "next", "itself", "cls", "sep", "own"]
    h = {name: dict(zip(cols, row(t, name, 7))) for name in
         ("uniform", "layer 0, head 0", "layer 0, head 1", "layer 1, head 0", "layer 1, head 1")}
    heads = [h[n] for n in h if n != "uniform"]
    (random_entropy,) = numbers(t, r"^random weights\s+" + NUM)
    (queries,) = numbers(t, r"^200 sentence pairs, ([\d,]+) queries")
    assert max(heads, key=lambda s: float(s["sep"])) is h["layer 1, head 0"]
    cls_low, cls_high = span([s["cls"] for s in heads])
    yield from [
        f"the untrained model of the same size is uniform to two decimals ({random_entropy} nats",
        f"The layer-1 heads are focused: {h['layer 1, head 0']['entropy']} and "
        f"{h['layer 1, head 1']['entropy']} nats",
        f"against {h['uniform']['entropy']} nats for even spreading over the "
        f"{round(int(queries.replace(',', '')) / 200)} tokens of an average pair",
        f"The layer-0 heads are broad ({h['layer 0, head 0']['entropy']} and {h['layer 0, head 1']['entropy']})",
        f"Layer 1, head 1 puts on average **{h['layer 1, head 1']['previous']}** of its weight on the previous "
        f"token, against {h['uniform']['previous']} for even spreading",
        f"head 0 puts **{h['layer 1, head 0']['next']}** on the next token",
        f"Layer 0, head 1 keeps {h['layer 0, head 1']['own']} of its weight inside the query's own segment, "
        f"against {h['uniform']['own']} for even spreading",
        f"the largest share is {h['layer 1, head 0']['sep']} (layer 1, head 0), less than twice the "
        f"{h['uniform']['sep']} of even spreading",
        f"`[CLS]` gets between {cls_low} and {cls_high} from each head",
        f"a next-token head ({h['layer 1, head 0']['next']} of its weight) and a previous-token head "
        f"({h['layer 1, head 1']['previous']})",
    ]
    assert float(h["layer 1, head 0"]["sep"]) < 2 * float(h["uniform"]["sep"])

    t = output_with(outputs, "largest weights")
    raised, exception = numbers(t, r"^layer 0, head 0, largest weights: raised -> raised " + NUM
                                + r", .*exception -> raised " + NUM)
    (sep,) = numbers(t, r"^layer 1, head 1, largest weights: open -> \[SEP\] " + NUM)
    yield f"its largest weight, {raised}, is *raised* on itself; *exception* puts {exception} on *raised*"
    yield f"*open*, the first token of sentence B, puts {sep} on the `[SEP]` before it"

    t = output_with(outputs, "training, draw 0")
    draws = re.findall(r"^\s*training, draw (\d) +" + NUM + " +" + NUM, t, re.MULTILINE)
    dropped = [(i, s) for i, w, s in draws if float(w) == 0]
    assert len(dropped) == 1, "the prose describes exactly one draw that dropped the weight"
    low, high = span([s for i, w, s in draws if float(w) != 0])
    yield f"In draw {dropped[0][0]} the weight on *the* was dropped (one draw in ten, as expected)"
    yield f"the row kept only {dropped[0][1]} of its mass"
    yield f"the row sums to between {low} and {high}, not to 1"

    t = output_with(outputs, "same word, other sense")
    def pair(word, a, b):       # a row of the table: the word(s), the two sentences, three cosines
        return numbers(t, r"^\s*" + r"\s+".join(map(re.escape, (word, a, b))) + r"\s+" + r"\s+".join([NUM] * 3))
    same = [pair("open", "we open the file .", "we open the socket ."),
            pair("return", "we return the value .", "we return the list ."),
            pair("list", "a list of files .", "a list of names ."),
            pair("set", "a set of values .", "a set of names .")]
    other = {"open": pair("open", "we open the file .", "to open a file ."),
             "return": pair("return", "we return the value .", "to return a value ."),
             "list": pair("list", "a list of files .", "the list is empty ."),
             "set": pair("set", "a set of values .", "the set is empty .")}
    sense = {"open": pair("open", "we open the file .", "an open file object ."),
             "return": pair("return", "we return the value .", "the return value is none ."),
             "list": pair("list", "a list of files .", "we list the files ."),
             "set": pair("set", "a set of values .", "we set the value .")}
    two = {"open/close": pair("open/close", "we open the file .", "we close the file ."),
           "list/set": pair("list/set", "a list of values .", "a set of values ."),
           "file/socket": pair("file/socket", "we open the file .", "we open the socket .")}
    (position,) = numbers(t, r"^open at positions 1 and 4 .*at the embeddings: " + NUM)
    layer0_low = span([c[1] for c in same + list(other.values()) + list(sense.values())])[0]
    yield f"every pair of the same word is still at {layer0_low} or above after it"
    yield "With the same neighbours the vectors stay at {} to {}".format(*span([c[2] for c in same]))
    yield "with other neighbours they drop to between {} and {}".format(*span([c[2] for c in other.values()]))
    yield (f"the verb is further from the noun ({sense['list'][2]}, {sense['set'][2]}) than two noun uses with "
           f"other neighbours are from each other ({other['list'][2]}, {other['set'][2]})")
    yield f"For *open* the difference is small ({sense['open'][2]} against {other['open'][2]})"
    yield f"for *return* it goes the other way ({sense['return'][2]} against {other['return'][2]})"
    assert float(sense["return"][2]) > float(other["return"][2]) and float(sense["open"][2]) < float(other["open"][2])
    yield "Two different words in the same context start at {} to {}".format(*span([c[0] for c in two.values()]))
    yield "and end at {} to {}".format(*span([c[2] for c in two.values()]))
    yield f"is less like *open* in *we open the file* ({other['open'][2]}) than *close* in *we close the file* " \
          f"is ({two['open/close'][2]})"
    yield f"takes *open* at positions 1 and 4 down to {position} already at the embeddings"

    t = output_with(outputs, "the same word in two sentences")
    same_word = row(t, "the same word in two sentences", 3)
    two_words = row(t, "two different words", 3)
    yield "move apart layer by layer ({}, {}, {})".format(*same_word)
    yield "than to other words' vectors ({}, {}, {})".format(*two_words)
    yield f"{two_words[0]} already at the embeddings"


# ------------------------------------------------------------------ 04 masked LM
def claims_04(outputs):
    t = output_with(outputs, "random replacements that happen to equal the original")
    count, expected, draws, vocab = numbers(
        t, r"equal the original: (\d+) \(expected " + NUM + r" = ([\d,]+) draws / ([\d,]+)\)")
    assert count == "0", "the prose says this pass had none"
    yield f"(the {vocab} entries that are not"
    yield f"with probability 1/{vocab}"
    yield f"This pass made {draws} random replacements of ordinary words"
    plain = lambda n: n.replace(",", "")
    yield f"${plain(draws)} / {plain(vocab)} = {expected}$ such coincidences; it happened to have none"
    yield f"$10\\% \\times (1 - 1/{plain(vocab)})$ random"

    t = output_with(outputs, "max_predictions_per_seq =")
    (cap,) = numbers(t, r"max_predictions_per_seq = (\d+) = ceil")
    (full,) = numbers(t, r"^predicted in a sequence of 128 tokens: round\(0\.15 \* 128\) = (\d+)")
    yield f"\\lceil 19.2 \\rceil = {cap}$ at length 128"
    yield f"at most {full} at length 128"
    yield f"up to {full} for a full-length instance of 128 tokens. The cap of {cap} would bind"


# ------------------------------------------------------------------ 09 what BERT is not
def claims_09(outputs):
    t = output_with(outputs, "post-LN by hand + MLM head")
    cos_low, cos_high, post0, pre0 = numbers(
        t, r"^after layer 0: .*cosine per token " + NUM + " to " + NUM + "; RMS size post-LN " + NUM
        + ", pre-LN " + NUM)
    post1, pre1 = numbers(t, r"^after layer 1: .*RMS size post-LN " + NUM + ", pre-LN " + NUM)
    (exception,) = numbers(t, r"post-LN \(BERT\)\s+exception " + NUM)
    guesses = numbers(t, r"pre-LN, same weights\s+" + r"\s+".join([r"\S+ " + NUM] * 4))
    assert len(set(guesses)) == 1, "the prose says the four best guesses get the same probability"
    assert 1.8 < float(pre0) / float(post0) < 2.2, "the prose says 'twice the size'"
    yield f"between {cos_low} and {cos_high}, and the pre-LN state is twice the size (RMS {pre0} against {post0})"
    yield f"(its four best guesses get {guesses[0]} each), where BERT's order gives *exception* {exception}"
    yield f"(RMS {pre1} against {post1})"

    t = output_with(outputs, "RMS after 1, 6, 12, 24 layers")
    post = numbers(t, r"^post-LN \(BERT\)\s+RMS after 1, 6, 12, 24 layers: " + " ".join([NUM] * 4)
                   + r"\s+input-output cosine, first 6 layers: " + NUM + ", last 6: " + NUM)
    pre = numbers(t, r"^pre-LN \(GPT-2\)\s+RMS after 1, 6, 12, 24 layers: " + " ".join([NUM] * 4)
                  + r"\s+input-output cosine, first 6 layers: " + NUM + ", last 6: " + NUM)
    (small,) = numbers(t, r"std 0\.02\) instead: RMS after 24 layers " + NUM)
    std_low, std_high = numbers(t, r"standard deviations " + NUM + " to " + NUM)
    assert len(set(post[:4])) == 1
    yield f"RMS {post[0]} at any depth"
    yield f"from {pre[0]} after one layer to {pre[3]} after 24"
    yield f"{pre[4]} on average over the first six layers, {pre[5]} over the last six"
    yield f"keeps changing its input ({post[4]}, then {post[5]})"
    yield f"grows by only {round((float(small) - 1) * 100)}% in 24 layers"
    yield f"standard deviations between {std_low} and {std_high}"

    t = output_with(outputs, "largest, other topics")
    pooled, cls, mean_tokens = (row(t, name, 3) for name in ("pooled output", "[CLS] vector", "mean of token vectors"))
    yield f"about as close to the sentences of other topics ({pooled[1]}) as to those of its own ({pooled[0]})"
    yield f"nearly parallel (up to {pooled[2]})"
    yield f"does show the topics ({cls[0]} against {cls[1]})"
    yield f"the **mean of the token vectors** ({mean_tokens[0]} against {mean_tokens[1]})"
    yield f"different topics have a cosine of {mean_tokens[1]} on average"

    t = output_with(outputs, "probability that a related pair")
    names = ("pooled output", "[CLS] vector", "mean of token vectors", "mean of word embeddings")
    r = {name: row(t, name, 3) for name in names}
    yield f"scores {r['pooled output'][2]}, barely better than a coin"
    yield (f"scores {r['[CLS] vector'][2]}, no better than the mean of the token vectors "
           f"({r['mean of token vectors'][2]})")
    yield f"mean of the word embeddings ({r['mean of word embeddings'][2]})"
    yield "unrelated sentences at a sizeable positive cosine, {} to {} on average".format(
        *span([v[0] for v in r.values()]))

    t = output_with(outputs, "along its main direction")
    share, along = numbers(t, r"^pooled output\s+" + NUM + r"\s+" + NUM)
    others = [numbers(t, r"^" + re.escape(name) + r"\s+" + NUM + r"\s+-$")[0] for name in names[1:]]
    yield f"{round(float(share) * 100)}% of the pooled vectors' variance"
    yield f"the NSP head reads (cosine {along})"
    yield "({} to {} along the main one)".format(*span(others))


# ------------------------------------------------------------------ 11 data parallelism
def claims_11(outputs):
    t = output_with(outputs, "its part of the naive gradient")
    k, M, m0, m1 = numbers(t, r"^batch (\d+): M = (\d+) masked positions, (\d+) on rank 0 and (\d+) on rank 1")
    (f0,) = numbers(t, r"^rank 0: its part of the naive gradient \(decoder bias\) is " + NUM)
    (f1,) = numbers(t, r"^rank 1: its part of the naive gradient \(decoder bias\) is " + NUM)
    (off,) = numbers(t, r"^the whole naive gradient is off by (\d+\.\d)%")
    table = output_with(outputs, "mean of the means")
    l0, l1, means, whole = numbers(table, rf"^\s*{k}\s+{m0}\s+{m1}\s+" + r"\s+".join([NUM] * 4))
    gap = float(means) - float(whole)
    share = int(m0) / int(M)
    assert abs(gap - (float(l0) - float(l1)) * (0.5 - share)) < 2e-3, "the prose's formula for the gap"
    yield (f"It is largest in batch {k}, whose halves hold {m0} and {m1} masked positions, with mean losses "
           f"{l0} and {l1}, and the mean of the means, {means}, is below the batch's mean, {whole}")
    yield (f"by ${float(l0) - float(l1):.3f} \\times (0.5 - {share:.1f}) = {gap:.3f}$. That is "
           f"{abs(gap) / float(whole):.1%} of the loss")
    yield f"here {f0} and {f1}"
    yield f"the gradient as a whole is off by {off}%"

    t = output_with(outputs, "predicted time of one ring allreduce")
    pcie, nvlink, ethernet = numbers(t, r"^\s*8\s+\d+\s+" + r"\s+".join([NUM] * 3))
    (step,) = numbers(t, r"measured, in milliseconds: " + NUM)
    share = {name: round(100 * float(v) / float(step)) for name, v in (("nvlink", nvlink), ("pcie", pcie))}
    yield (f"next to the {step} ms of the H100's step, summing over NVLink adds {nvlink} ms with 8 workers "
           f"({share['nvlink']}%), over PCIe {pcie} ms ({share['pcie']}%), and over 100 Gb/s Ethernet {ethernet} ms")


CLAIMS = {"03_attention.ipynb": claims_03, "04_masked_lm.ipynb": claims_04,
          "09_what_bert_is_not.ipynb": claims_09, "11_data_parallelism.ipynb": claims_11}


@pytest.mark.parametrize("name", sorted(CLAIMS))
def test_prose_quotes_the_outputs(name):
    outputs, prose = load(name)
    missing = [phrase for phrase in CLAIMS[name](outputs) if " ".join(phrase.split()) not in prose]
    assert not missing, (f"{name}: the Markdown does not say what the outputs print; expected to find:\n  "
                         + "\n  ".join(missing))
