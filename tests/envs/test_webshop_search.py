"""BM25 search: scores equal Lucene's formula on a tiny corpus; the analyzer is Lucene-like."""

from __future__ import annotations

import math

import pytest

from envs.webshop.data import Product
from envs.webshop.search import K1, Analyzer, B, SearchIndex, document_text

DOCS = [
    "Red running shoes for men",
    "The women's running shirt, red and blue",
    "Blue shirts",
    "Coffee beans, dark roast",
]


def lucene_bm25(query_terms, doc_terms, corpus_terms):
    """Lucene 8+ BM25: sum idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))."""
    n = len(corpus_terms)
    avgdl = sum(len(d) for d in corpus_terms) / n
    score = 0.0
    for term in query_terms:
        df = sum(term in d for d in corpus_terms)
        tf = doc_terms.count(term)
        if df == 0 or tf == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        score += idf * tf / (tf + K1 * (1 - B + B * len(doc_terms) / avgdl))
    return score


def test_analyzer_drops_stop_words_and_possessives_and_stems():
    analyze = Analyzer()
    assert analyze("The women's running shirt, red and blue") == [
        "women",
        "run",
        "shirt",
        "red",
        "blue",
    ]
    assert analyze("A 3 oz bottle") == ["3", "oz", "bottl"]


@pytest.mark.parametrize("query", ["red running shirt", "blue", "shirts for running", "dark"])
def test_scores_match_the_lucene_formula(query):
    index = SearchIndex([f"B00000000{i}" for i in range(len(DOCS))], DOCS)
    analyze = Analyzer()
    corpus = [analyze(d) for d in DOCS]
    expected = [lucene_bm25(analyze(query), doc, corpus) for doc in corpus]
    assert list(index.scores(query)) == pytest.approx(expected, rel=1e-5)


def test_search_ranks_best_first_and_skips_non_matching():
    index = SearchIndex([f"B00000000{i}" for i in range(len(DOCS))], DOCS)
    assert index.search("red running shirt") == ["B000000001", "B000000000", "B000000002"]
    assert index.search("coffee") == ["B000000003"]
    assert index.search("unknownword") == []
    assert index.search("red running shirt", k=1) == ["B000000001"]


def test_ties_go_to_the_earlier_document():
    docs = ["tea cup"] * 60
    index = SearchIndex([f"A{i:09d}" for i in range(60)], docs)
    assert index.search("tea") == [f"A{i:09d}" for i in range(50)]


def test_document_text_is_what_the_original_indexes():
    product = Product(
        asin="B000000001",
        title="Tea Cup",
        description="A cup.",
        bullet_points=["Fine china", "x"],
        pricing=[5.0],
        price_tag="$5.0",
        options={"color": ["red", "blue"], "size": ["s"]},
        attributes=[],
        category="home",
        query="cups",
        product_category="",
        name="Tea Cup",
    )
    assert document_text(product) == "tea cup a cup. fine china color: red, blue, and size: s"


def test_one_and_two_letter_words_are_not_stemmed_as_in_lucene():
    # Snowball's porter turns "s" into "" (a token bm25s reserves) and "is" into "i".
    assert Analyzer()("t-shirt size s") == ["t", "shirt", "size", "s"]
    assert Analyzer()("xs us") == ["xs", "us"]
    assert "" not in Analyzer()("s 's ss")


def test_a_one_letter_size_finds_the_product_with_that_size():
    docs = ["cotton t-shirt size: s", "cotton t-shirt size: xl"]
    index = SearchIndex(["B000000001", "B000000002"], docs)
    assert index.search("t-shirt size s") == ["B000000001", "B000000002"]
    assert index.search("s") == ["B000000001"]


def test_the_reserved_empty_token_never_reaches_bm25s():
    index = SearchIndex(["B000000001", "B000000002"], ["red shoes", "blue hat"])
    assert "" in index._vocab  # bm25s' own placeholder, with no score column
    index.analyzer = lambda text: ["", "red"]  # an analyzer that lets an empty term through
    assert index.search("anything") == ["B000000001"]
