"""The knobs of recall() (`RecallConfig`), each default naming its source, and the default edge-type weights and
recency time constants per node type it starts from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_EDGE_TYPE_WEIGHT: Mapping[str, float] = {
    # Seed 004 App. A for the types it names; role and mention edges tie a Fact/Episode
    # to the entities it is about, so they carry about as much as ABOUT.
    "ABOUT": 1.0,
    "SUPPORTS": 0.8,
    "SIMILAR_TO": 0.5,
    "TEMPORAL_NEXT": 0.3,
    "SAME_AS": 1.0,
    "DERIVED_FROM": 1.0,
    "ACTIVE_OF": 0.8,
    "VERSION_NEXT": 0.6,
    "CONTRADICTS": 0.6,
    "CAUSES": 0.8,
    "CAUSED_BY": 0.8,
    "REFERS_TO": 0.8,
    "AGENT": 0.8,
    "PATIENT": 0.8,
    "LOCATION": 0.8,
    "TIME": 0.6,
    "MANNER": 0.6,
    "INSTRUMENT": 0.6,
    "RECIPIENT": 0.6,
    "CAUSE": 0.8,
    "BENEFICIARY": 0.6,
    "MENTIONS": 0.6,
}


DEFAULT_TAU_DAYS: Mapping[str, float] = {
    "Episode": 14.0,
    "Fact": 90.0,
    "Preference": 90.0,
    "Task": 30.0,
    "Concept": 180.0,
    "Entity": 180.0,
    "Meta": 180.0,
    "RawChunk": 14.0,
}


@dataclass(frozen=True)
class RecallConfig:
    """Knobs of the recall pipeline; defaults follow seed 004 App. A, renormalised without vectors.

    score = λ1*BM25 + λ2*cos + λ3*graph + λ4*weight(node): λ1=0.2, λ3=0.3, λ4=0.1 over their sum 0.6, λ2 by CV.
    weight(node) is seed 004 §6.1's α*importance + β*log(1+frequency) + γ*exp(-Δt/τ_type) + δ*|sentiment|, divided by α+β+γ+δ so it
    stays in [0, 1] (log frequency is scaled to 1 at frequency_cap). The seed's user
    feedback and staleness terms wait for the feedback records of consolidation.
    """

    lambda_bm25: float = 0.2 / 0.6
    lambda_graph: float = 0.3 / 0.6
    lambda_weight: float = 0.1 / 0.6
    weight_importance: float = 0.4  # α
    weight_frequency: float = 0.2  # β
    weight_recency: float = 0.4  # γ
    weight_emotion: float = 0.0  # δ (R2G leaves sentiment empty so far)
    frequency_cap: int = 10
    seed_limit: int = 50
    expand_edge_types: frozenset[str] | None = None  # None: every edge type in the graph
    edge_type_weight: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_EDGE_TYPE_WEIGHT))
    default_edge_type_weight: float = 0.5
    hub_degree: int = 200  # a node touching more (a speaker entity) is not expanded through
    hop_decay: float = 0.5  # each further hop counts this much less
    graph_method: str = "ppr"  # "ppr" (personalised PageRank) or "spread" (seed-weighted sum)
    ppr_damping: float = 0.85
    tau_days: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_TAU_DAYS))
    default_tau_days: float = 90.0
    max_citations: int = 3
    aggregate_citations: int = 1  # citations of an Entity/Concept result (the lines the query matched)
    # score multiplier per node type: an entity or topic card is context for the lines that answer a question,
    # so it ranks below a line that matches as well
    # ("Type/subtype" first): a rollup summary is a card over the turns it holds, like a topic
    type_prior: Mapping[str, float] = field(
        default_factory=lambda: {"Entity": 0.5, "Concept": 0.5, "Episode/rollup": 0.5}
    )
    # query analysis (recall.query): seeds for the entities a question names, and boosts
    named_entity_seed: float = 0.5
    time_match_boost: float = 0.5  # × (1 + this) for a memory inside a time the question states
    intent_type_boost: Mapping[str, Mapping[str, float]] = field(
        default_factory=lambda: {"preference": {"Preference": 1.5}}
    )
    max_evidence: int = 5
    raw_fallback: bool = True
    raw_min_seeds: int = 3  # fewer node seeds than this → also search raw passages
    raw_limit: int = 10
    graph_enabled: bool = True  # degradation switches (seed 004 §18): each stage can be off
    bm25_enabled: bool = True
    # stage B (recall.vectors, the static embedders): off by default, as cross-validation by conversation found
    # no gain on LoCoMo (bench/README.md); λ2 = 0.1 the weight CV chose on zh_dev; 0 is stage B off
    vectors_enabled: bool = False
    lambda_vector: float = 0.1
    vector_limit: int = 50
    vector_seed: float = 1.0  # × a vector hit's score when it seeds the expansion (0: vectors only score)
    vector_minmax: bool = False  # hits' cosines min-max scaled over the hits (static vectors are anisotropic)
    vector_embedder: str | None = None  # None: $MEMCTL_VECTORS (the embedder the index was built with)
    mmr_lambda: float = 0.7  # MMR: relevance vs novelty; 1.0 turns de-duplication off
    mmr_threshold: float = 0.7  # seed 004's diversity threshold: this similar to a pick → only after the rest
    mmr_pool: int = 50  # candidates MMR picks from (best scores first)
    # multi-hop (recall.hop; bench/README.md "Multi-hop through the graph"): the turns next to the best 5 seeds seed
    # at 0.6 × that seed's score, and a line said by someone the question names scores × 1.5 — values chosen by
    # cross-validation on LoCoMo dev with zh_dev kept from losing; pseudo-relevance feedback (prf_*) measured no gain
    # and stays off (0)
    prf_weight: float = 0.0
    prf_docs: int = 5
    prf_terms: int = 8
    session_weight: float = 0.6
    session_top: int = 5
    speaker_boost: float = 0.5
