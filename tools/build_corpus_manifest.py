"""Make minibert/data/builtin_corpus.manifest: the sentences every given CPython shares.

    python tools/build_corpus_manifest.py python3.13 python3.12 python3.11 /usr/bin/python3 ...

Each interpreter reads its own standard library's prose (``source_documents``);
a sentence enters the manifest only if every interpreter has it word for word.
The documents and their order are those of the first interpreter, each cut down
to the shared sentences; documents left with fewer than two are dropped. The
header records the interpreters and the fingerprint of the resulting corpus, which
``tests/test_portability.py`` checks under every Python it finds.

Run it again when a new CPython version is supported: the corpus can only shrink
(a sentence has to be in every version), and every figure that depends on it moves.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Runs under each interpreter: imports minibert's corpus code alone (standard library
# only), so an interpreter without NumPy or minibert installed can take part.
SNIPPET = f"""
import json, sys, types
for name, folder in (("minibert", "minibert"), ("minibert.data", "minibert/data")):
    package = types.ModuleType(name); package.__path__ = [str({str(ROOT)!r}) + "/" + folder]
    sys.modules[name] = package
from minibert.data import builtin as bc
{{body}}
"""


def run_under(python: str, body: str) -> str:
    """Run ``body`` under ``python`` with ``bc`` (minibert.data.builtin) imported; its stdout."""
    done = subprocess.run([python, "-c", SNIPPET.format(body=body)], capture_output=True, text=True, check=True)
    return done.stdout


def corpus_module():
    """minibert.data.builtin in this interpreter: as SNIPPET imports it, unless already imported."""
    if "minibert.data.builtin" not in sys.modules:
        exec(SNIPPET.format(body=""), {})
    return sys.modules["minibert.data.builtin"]


def main(pythons: list[str]) -> None:
    if len(pythons) < 2:
        sys.exit(__doc__)
    bc = corpus_module()
    Corpus = bc.Corpus
    versions, sources = [], []
    for python in pythons:
        out = run_under(python, "print(sys.version.split()[0]); print(json.dumps(bc.source_documents()))")
        version, documents = out.split("\n", 1)
        versions.append(version)
        sources.append(json.loads(documents))
        print(f"{python}: CPython {version}, {sum(len(d) for _, d in sources[-1]):,} sentences", file=sys.stderr)
    shared = set.intersection(*({s for _, doc in docs for s in doc} for docs in sources))
    kept = [(source, cut) for source, doc in sources[0] if len(cut := [s for s in doc if s in shared]) >= 2]
    corpus = Corpus("builtin", [doc for _, doc in kept])
    lines = [
        "# minibert's built-in corpus: which sentences of CPython's own prose it takes (see builtin_corpus.py).",
        "# One line per document: where it comes from (a module, or topic:NAME of the language reference),",
        "# then for each sentence the first 12 hexadecimal digits of the SHA-256 of its UTF-8 bytes.",
        "# Made by tools/build_corpus_manifest.py; only sentences that all of these have word for word:",
        f"# made from: {', '.join(versions)}",
        f"# corpus: {corpus}",
        f"# corpus sha256: {corpus.fingerprint()}",
    ]
    lines += [" ".join([source] + [bc.sentence_fingerprint(s) for s in doc]) for source, doc in kept]
    bc.MANIFEST.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {bc.MANIFEST}: {corpus}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
