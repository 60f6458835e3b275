"""Retrieval with the real MiniLM embedder ranks what a turn needs first."""

from __future__ import annotations

from memory import RetrievalConfig, RetrievalQuery


def test_a_shoe_size_question_ranks_the_size_note_above_the_pricing_note(local_bank, samples):
    price = local_bank.add(samples.price).entry
    size = local_bank.add(samples.size).entry
    query = RetrievalQuery(
        instruction="i need a pair of men's running shoes in size 10, price lower than 60 dollars",
        observation="What shoe size should I pick? [SEP] size [SEP] 8 [SEP] 9 [SEP] 10",
        env="webshop",
        category="footwear",
    )
    config = RetrievalConfig(k_task=2, min_similarity=-1.0)
    ranked = local_bank.retrieve([query], config, record=False)[0].task
    assert [r.entry.id for r in ranked] == [size.id, price.id]
    assert ranked[0].similarity > ranked[1].similarity


def test_batched_retrieval_equals_one_query_at_a_time(local_bank, samples):
    for draft in (samples.size, samples.price, samples.general, samples.mistake):
        local_bank.add(draft)
    queries = [
        RetrievalQuery("shoes in size 9", "", "webshop", "footwear"),
        RetrievalQuery("cheap sandals under 20 dollars", "", "webshop", "footwear"),
        RetrievalQuery("a red dress", "", "webshop", "apparel"),
    ]
    config = RetrievalConfig(min_similarity=0.0)
    batched = local_bank.retrieve(queries, config, record=False)
    single = [local_bank.retrieve([q], config, record=False)[0] for q in queries]
    for one, other in zip(batched, single, strict=True):
        assert one.ids == other.ids
        for a, b in zip(one.all, other.all, strict=True):
            assert abs(a.similarity - b.similarity) < 1e-4
