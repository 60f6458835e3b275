"""Batched per-turn retrieval: one embedding pass per batch, then one index query per kind.

The index keeps one collection per partition (see ``memory.index.partition_of``), so every
query is an unfiltered nearest-neighbour search: general skills once per distinct env in the
batch, plus once for the env-agnostic ones, merged by similarity; task
skills once per distinct (env, category) in the batch (a query without a category searches every
task category of its env: a person asking "what shoe size" should not have to name "footwear");
counterfactual notes once per distinct env, plus once for env-agnostic notes, merged by
similarity; cases once per distinct env, by the embedding of the request alone (a case says
what solved a similar request, whatever page this turn shows). Task skills, notes and cases
below ``min_similarity`` are dropped; general skills never are:
every turn gets the best ``k_general`` of them, as SkillRL always puts its general skills in the
prompt (they are phrased for any task, so their similarity to one turn's text is low by design
and a cut-off would hide them all). A query's ``withheld_ids`` are taken out of its result
after the selection, leaving their places empty: a paired-utility rollout that withholds one
entry then differs from the rollout with it by that entry alone, not by a stand-in that moved up
into its place. The entries are read from SQL in one pass, and, when
``record`` is set, the retrieval events and ``times_retrieved`` counters are written in one
transaction.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
from sqlalchemy import bindparam, insert, update

from memory.config import RetrievalConfig
from memory.entries import read_entries
from memory.index import IndexRecord, Partition
from memory.models import EntryRow, RetrievalEventRow, utcnow
from memory.store import BankStore
from memory.types import (
    RetrievalEvent,
    RetrievalQuery,
    RetrievedEntry,
    RetrievedSkills,
    offer_values,
    retrieval_events,
)

MAX_OBSERVATION_CHARS = 2000
"""Observation text embedded per query (the model reads only its first 256 tokens anyway)."""

Hits = list[list[IndexRecord]]

MISTAKE_OVERFETCH = 3
"""Notes are fetched env-wide (a lesson learnt in one category often transfers), so the same
lesson can stand in several categories: fetch this many times k_mistakes, keep one per title."""


def query_text(query: RetrievalQuery) -> str:
    """Return the text embedded for a query: the task first, then the observation."""
    return f"{query.instruction}\n{query.observation[:MAX_OBSERVATION_CHARS]}"


def retrieve(
    store: BankStore, queries: list[RetrievalQuery], config: RetrievalConfig, *, record: bool
) -> list[RetrievedSkills]:
    """Embed every query in one pass, then :func:`retrieve_vectors`."""
    if not queries:
        return []
    vectors = store.embedder.embed([query_text(q) for q in queries])
    wants_cases = config.k_cases > 0 and _holds_cases(store, queries)
    request_vectors = request_embeddings(store, queries) if wants_cases else None
    return retrieve_vectors(
        store, queries, vectors, config, record=record, request_vectors=request_vectors
    )


def _holds_cases(store: BankStore, queries: list[RetrievalQuery]) -> bool:
    """Whether the index holds a case of any query's env (else the requests are not embedded)."""
    store.sync_index()
    return any(store.index.partitions("case", env) for env in {q.env for q in queries})


def request_embeddings(store: BankStore, queries: list[RetrievalQuery]) -> np.ndarray:
    """Embed each query's instruction alone (what cases are retrieved by).

    Every turn of an episode asks with the same instruction, so each one is embedded once and
    kept on the store (at most :data:`REQUEST_CACHE` of them, the oldest dropped first).
    """
    cache = store.request_vectors
    missing = [t for t in dict.fromkeys(q.instruction for q in queries) if t not in cache]
    for text, vector in zip(missing, store.embedder.embed(missing) if missing else [], strict=True):
        cache[text] = np.asarray(vector)
    vectors = np.stack([cache[q.instruction] for q in queries])
    while len(cache) > REQUEST_CACHE:
        cache.pop(next(iter(cache)))
    return vectors


REQUEST_CACHE = 4096
"""Instructions whose embedding the store keeps (a batch of episodes holds a few dozen)."""


TIE = 1e-5
"""Similarities closer than this are a tie. Identical texts embed to vectors that agree only to
float rounding (a batch pads each text to its longest member), so their similarities to one
query can differ by about 1e-7."""


def _grouped_query(store: BankStore, vectors: np.ndarray, keys: list[Partition], k: int) -> Hits:
    """Query the index once per distinct partition among ``keys`` (one key per query).

    Each list holds the k nearest hits plus every hit tied with the k-th: the index orders ties
    arbitrarily, so :func:`_settle` breaks them by content instead (a rerun, or a resumed
    training run, then retrieves the same entries).
    """
    out: Hits = [[] for _ in keys]
    if k <= 0:
        return out
    groups: dict[Partition, list[int]] = defaultdict(list)
    for position, key in enumerate(keys):
        groups[key].append(position)
    for key, positions in groups.items():
        fetch = k + 1
        while True:
            hits = store.index.query(vectors[positions], fetch, key)
            if not any(_tied_at_cut(row, k, fetch) for row in hits):
                break
            fetch *= 2
        for position, row in zip(positions, hits, strict=True):
            cut = row[:k]
            out[position] = cut + [h for h in row[k:] if cut and _tie(h, cut[-1])]
    return out


def _tie(a: IndexRecord, b: IndexRecord) -> bool:
    return abs((a.similarity or 0.0) - (b.similarity or 0.0)) <= TIE


def _tied_at_cut(row: list[IndexRecord], k: int, fetched: int) -> bool:
    """Whether hits past ``fetched`` could still tie with the k-th (so fetch more)."""
    return len(row) == fetched and _tie(row[-1], row[k - 1])


CASE_OVERFETCH = 8
"""With a fit margin, cases are fetched this many times k_cases, the neighbours that compete on
fit (on eval-split goals, no more than 4 nearest ever changed which case was served)."""


def _limits(config: RetrievalConfig) -> dict[str, int]:
    """Hits each kind fetches per query (notes, and cases with a fit margin, are over-fetched)."""
    return {
        "general": config.k_general,
        "task": config.k_task,
        "mistakes": config.k_mistakes * MISTAKE_OVERFETCH,
        "cases": config.k_cases * (CASE_OVERFETCH if config.case_fit_margin > 0 else 1),
    }


def _settle(
    hits: list[RetrievedEntry], k: int, wants: tuple[str, ...] = (), margin: float = 0.0
) -> list[RetrievedEntry]:
    """Keep the k best hits, most similar first; ties in the order of :func:`_tie_order`.

    ``wants`` (cases only): among tied hits, the ones whose offers hold all of them come first
    (:func:`_case_order`); with a ``margin``, so do they among the hits within ``margin`` of the
    most similar one (``RetrievalConfig.case_fit_margin``), each side kept in that order.
    """
    # Ties are runs within TIE of their most similar member, not rounding buckets: rounding
    # splits two noisy copies of one similarity whenever a bucket edge falls between them.
    groups: list[list[RetrievedEntry]] = []
    for hit in sorted(hits, key=lambda r: -r.similarity):
        if groups and groups[-1][0].similarity - hit.similarity <= TIE:
            groups[-1].append(hit)
        else:
            groups.append([hit])
    wanted = offer_values(wants)
    ordered = [
        hit
        for group in groups
        for hit in sorted(group, key=lambda h: (*_case_order(h, wanted), *_tie_order(h)))
    ]
    if margin > 0 and wanted and ordered:
        # A near request whose product comes in what is wanted beats the nearest request's
        # product that is known not to: the request's words are alike, the options are not.
        reach = ordered[0].similarity - margin - TIE
        near = sum(1 for hit in ordered if hit.similarity >= reach)  # a prefix: sorted above
        ordered[:near] = sorted(ordered[:near], key=lambda h: _case_order(h, wanted)[0])
    return ordered[:k]


def _case_order(hit: RetrievedEntry, wanted: frozenset[str]) -> tuple[int, int]:
    """Order of tied cases (the cases of one request, each naming another solution).

    First the ones that offer everything the query wants (or whose offers are not known: no
    evidence against them), then the ones known to lack something; within each, the case that
    solved the most episodes (its support) first. Other kinds tie as they are.
    """
    entry = hit.entry
    if entry.kind != "case":
        return (0, 0)
    lacks = bool(wanted) and bool(entry.offers) and not wanted <= entry.offered
    return (int(lacks), -entry.support_count)


def _tie_order(hit: RetrievedEntry) -> tuple[str, ...]:
    """Order of tied hits: by what the entry says and where it applies, its id last.

    Nothing that depends on when or in which order entries were written (their age, the
    index's order) takes part: a run whose distillation wrote the same entries in another order,
    or a resumed run whose entries got other ids, serves the same entries turn by turn.
    """
    entry = hit.entry
    return (
        entry.kind,
        entry.env or "",
        entry.category or "",
        entry.title,
        entry.text_for_embedding(),
        entry.id,
    )


def search_index(
    store: BankStore,
    queries: list[RetrievalQuery],
    vectors: np.ndarray,
    config: RetrievalConfig,
    request_vectors: np.ndarray | None = None,
) -> dict[str, Hits]:
    """Index hits per kind for each query, before the similarity cut (notes not yet ordered).

    ``request_vectors``: the queries' instructions embedded alone, which cases are searched by
    (None: no case is searched).
    """
    n = len(queries)
    limits = _limits(config)
    k_notes = limits["mistakes"]
    mistakes_of_env = _grouped_query(
        store, vectors, [("mistake", q.env, "") for q in queries], k_notes
    )
    env_agnostic = _grouped_query(store, vectors, [("mistake", "", "")] * n, k_notes)
    return {
        "general": _general_hits(store, queries, vectors, limits["general"]),
        "task": _task_hits(store, queries, vectors, limits["task"]),
        # Both lists together; _settle orders them and keeps the best.
        "mistakes": [x + y for x, y in zip(mistakes_of_env, env_agnostic, strict=True)],
        "cases": (
            _grouped_query(
                store, request_vectors, [("case", q.env, "") for q in queries], limits["cases"]
            )
            if request_vectors is not None
            else [[] for _ in queries]
        ),
    }


def _general_hits(
    store: BankStore, queries: list[RetrievalQuery], vectors: np.ndarray, k: int
) -> Hits:
    """General-skill hits: the query's env's own and the env-agnostic ones, together.

    A general skill written for one environment (how to shop) is never served in another (a
    Sokoban room); one without an env serves every environment.
    """
    agnostic = _grouped_query(store, vectors, [("general", "", "")] * len(queries), k)
    own_envs = [q.env or "" for q in queries]
    if not any(own_envs):
        return agnostic
    own = _grouped_query(store, vectors, [("general", env, "") for env in own_envs], k)
    return [x + y if env else x for x, y, env in zip(agnostic, own, own_envs, strict=True)]


def _task_hits(
    store: BankStore, queries: list[RetrievalQuery], vectors: np.ndarray, k: int
) -> Hits:
    """Task-skill hits: the query's own category, or every category of its env when it has none.

    Each category contributes its k best (plus ties); :func:`_settle` keeps the k best overall.
    """
    out = _grouped_query(store, vectors, [("task", q.env, q.category or "") for q in queries], k)
    open_positions: dict[str, list[int]] = defaultdict(list)
    for position, query in enumerate(queries):
        if not query.category:
            open_positions[query.env].append(position)
    for env, positions in open_positions.items():
        for key in store.index.partitions("task", env):
            if not key[2]:
                continue  # the category-less partition was searched above
            hits = _grouped_query(store, vectors[positions], [key] * len(positions), k)
            for position, row in zip(positions, hits, strict=True):
                out[position] = out[position] + row
    return out


def retrieve_vectors(
    store: BankStore,
    queries: list[RetrievalQuery],
    vectors: np.ndarray,
    config: RetrievalConfig,
    *,
    record: bool,
    request_vectors: np.ndarray | None = None,
) -> list[RetrievedSkills]:
    """Retrieve for queries whose embeddings are already computed.

    ``request_vectors``: the instructions embedded alone (:func:`request_embeddings`); without
    them no case is retrieved.
    """
    store.sync_index()
    hits = search_index(store, queries, vectors, config, request_vectors)
    for kind, per_query in hits.items():
        if kind == "general":
            continue  # always the best k_general (module docstring)
        for position, row in enumerate(per_query):
            per_query[position] = [
                h for h in row if h.similarity is not None and h.similarity >= config.min_similarity
            ]
    wanted = {h.id for per_query in hits.values() for row in per_query for h in row}
    entries = read_entries(store.engine, sorted(wanted))
    results = []
    limits = _limits(config)
    for position in range(len(queries)):
        chosen = {
            kind: _settle(
                [
                    RetrievedEntry(entries[h.id], float(h.similarity or 0.0))
                    for h in per_query[position]
                    # An index record whose entry is gone or retired in SQL is never served.
                    if h.id in entries and entries[h.id].status == "active"
                ],
                config.k_cases if kind == "cases" else limits[kind],
                queries[position].wants if kind == "cases" else (),
                config.case_fit_margin if kind == "cases" else 0.0,
            )
            for kind, per_query in hits.items()
        }
        chosen["mistakes"] = distinct_lessons(
            chosen["mistakes"], queries[position].category, config.k_mistakes
        )
        # Withheld after the selection, so nothing takes their places (module docstring).
        results.append(RetrievedSkills(**chosen).without(queries[position].withheld_ids))
    if record:
        record_events(store, retrieval_events(queries, results))
    return results


def distinct_lessons(
    hits: list[RetrievedEntry], category: str | None, k: int
) -> list[RetrievedEntry]:
    """Keep the k most similar notes with distinct titles, preferring the query's own category.

    Two notes with one title teach one lesson; showing both would spend the prompt budget twice.
    """
    kept: dict[str, RetrievedEntry] = {}
    for hit in hits:  # most similar first
        title = hit.entry.title.strip().lower()
        seen = kept.get(title)
        if seen is None:
            kept[title] = hit
        elif seen.entry.category != category and hit.entry.category == category:
            kept[title] = RetrievedEntry(hit.entry, max(hit.similarity, seen.similarity))
    return sorted(kept.values(), key=lambda r: -r.similarity)[:k]


def record_events(store: BankStore, events: list[RetrievalEvent]) -> None:
    """Write the retrieval events and bump each entry's ``times_retrieved``, atomically."""
    now = utcnow()
    rows = [{**event.to_dict(), "created_at": now} for event in events]
    if not rows:
        return
    counts = Counter(row["entry_id"] for row in rows)
    table = EntryRow.__table__
    bump = (
        update(table)
        .where(table.c.id == bindparam("b_id"))
        .values(times_retrieved=table.c.times_retrieved + bindparam("b_n"))
    )
    with store.transaction() as (session, _undo):
        connection = session.connection()
        connection.execute(insert(RetrievalEventRow.__table__), rows)
        connection.execute(bump, [{"b_id": i, "b_n": n} for i, n in counts.items()])
