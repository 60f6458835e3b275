r"""BM25 product search with the settings of the original's Lucene (pyserini) index.

The original indexes, per product, ``" ".join([Title, Description, BulletPoints[0], option_text])``
lowercased (``search_engine/convert_product_file_format.py``), where ``option_text`` is
``"name: v1, v2, and name2: ..."``, and searches it with pyserini's defaults: BM25 with k1=0.9,
b=0.4, Lucene's idf ``log(1 + (N - df + 0.5) / (df + 0.5))``, and the English analyzer (standard
tokenizer, possessive ``'s`` removal, lowercase, Lucene's English stop words, Porter stemming;
Lucene's Porter stemmer, like Porter's reference code, leaves words of one or two letters alone,
so ``s`` stays ``s`` where the Snowball stemmer would make it empty).
It returns the top 50 hits.

Scoring is done by ``bm25s`` (``method="lucene"``); the analyzer is ours because bm25s' own
tokenizer drops one-character tokens and has a different stop list. Departures from Lucene:
``\w+`` tokenisation approximates the Unicode standard tokenizer, and document lengths are exact
(Lucene stores them lossily in one byte), so scores can differ in the last digits; ties are
broken by catalog order, as Lucene breaks them by document id.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence

import bm25s
import numpy as np
import Stemmer

from envs.webshop.data import Product

logger = logging.getLogger(__name__)

K1 = 0.9
B = 0.4
TOP_K = 50
# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET.
LUCENE_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)
_TOKEN = re.compile(r"\w+")
_POSSESSIVE = re.compile(r"['\u2019][sS]\b")


class Analyzer:
    """Lucene-style English analysis: tokens, possessives, lowercase, stop words, Porter stems."""

    def __init__(self) -> None:
        self._stemmer = Stemmer.Stemmer("porter")
        self._stemmer.maxCacheSize = 100_000

    def __call__(self, text: str) -> list[str]:
        """Analyse one text into index terms (never an empty term: bm25s reserves it)."""
        words = _TOKEN.findall(_POSSESSIVE.sub("", text).lower())
        terms = [self._stem(w) for w in words if w not in LUCENE_STOP_WORDS]
        return [t for t in terms if t]

    def _stem(self, word: str) -> str:
        # Lucene's PorterStemmer skips words of length <= 2 (`if (k > k0+1)`); Snowball's
        # porter would turn "s" into "" and "is" into "i".
        return word if len(word) <= 2 else self._stemmer.stemWord(word)


def document_text(product: Product) -> str:
    """Return the text the original indexes for a product."""
    option_text = ", and ".join(
        f"{name}: {', '.join(values)}" for name, values in product.options.items()
    )
    first_bullet = product.bullet_points[0] if product.bullet_points else ""
    return " ".join([product.title, product.description, first_bullet, option_text]).lower()


class SearchIndex:
    """A BM25 index over product documents; :meth:`search` returns ASINs, best first."""

    def __init__(self, asins: Sequence[str], documents: Iterable[str]) -> None:
        self.asins = list(asins)
        self.analyzer = Analyzer()
        corpus = [self.analyzer(doc) for doc in documents]
        if len(corpus) != len(self.asins):
            raise ValueError(f"{len(self.asins)} asins but {len(corpus)} documents")
        self._bm25 = bm25s.BM25(k1=K1, b=B, method="lucene", idf_method="lucene")
        # An empty document would trip bm25s' vocabulary step; a placeholder term cannot match.
        self._bm25.index([tokens or ["\x00"] for tokens in corpus], show_progress=False)
        self._vocab: dict[str, int] = self._bm25.vocab_dict

    @classmethod
    def from_products(cls, products: Sequence[Product]) -> SearchIndex:
        """Index products the way the original does."""
        return cls([p.asin for p in products], (document_text(p) for p in products))

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (zeros when no term is known)."""
        # bm25s puts a reserved empty token in its vocabulary that has no score column.
        ids = [self._vocab[t] for t in self.analyzer(query) if t and t in self._vocab]
        if not ids:
            return np.zeros(len(self.asins), dtype=np.float32)
        return self._bm25.get_scores(ids)

    def search(self, query: str, k: int = TOP_K) -> list[str]:
        """ASINs of the top ``k`` documents that match at least one query term."""
        scores = self.scores(query)
        hits = np.flatnonzero(scores > 0)
        if hits.size > k:
            # Partial selection first (sorting 100k scores per query is the slow part); keep
            # every tie of the k-th score so that ties still go to the earliest document.
            kth = -np.partition(-scores[hits], k - 1)[k - 1]
            hits = hits[scores[hits] >= kth]
        order = hits[np.lexsort((hits, -scores[hits]))]
        return [self.asins[i] for i in order[:k]]
