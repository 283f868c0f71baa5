"""Evolutionary search guided by a cost model (TVM MetaSchedule's EvolutionarySearch).

A measurement costs a build and many runs; the cost model scores a point in
microseconds to milliseconds. So the search measures only what the model ranks
best, and finds it by evolving a population rather than ranking the whole space,
which a generated or user-written space is too large (or too irregular) to
enumerate. Children are small mutations of parents the model likes (a prime
factor moved from one tile to another, a neighbouring parallel extent), so
they stay near good points, where the model has data and is most trustworthy.

Each ask, in order:

1. until ``warmup`` candidates ran (and no transfer records were given), propose
   nothing: the base class measures at random, and the model has nothing to learn;
2. fit the cost model on every observation and the transfer records;
3. fit a second, cheap model that reads only the decisions (see below);
4. keep the designs the batch is shared among (below);
5. the first population, of those designs: the fastest points measured so far,
   the fastest that sibling workloads measured (below), and random ones;
6. each of ``generations`` times: score the population with the cheap model,
   draw parents with probability proportional to their predicted throughput
   (relative to their design's best), mutate each into a child, and keep the
   children not met before;
7. replay the best-scored unvisited points met in any generation,
   ``SHORTLIST_PER_CANDIDATE`` per candidate wanted, and rank them by the cost
   model; propose the best, the designs taking turns, except a share ``epsilon``
   of random points, so regions the model wrongly thinks poor still get measured,
   and a share ``sweep_share`` taken first by the location sweep (below).

The location sweep. A block's compute location (a convolution's padding computed
inline, at the root, or at one of a dozen tile loops) changes a kernel's memory
traffic more than any tile does, and the search seldom moves it: the mutators
change it in one child of about 25 (MetaSchedule's probabilities), and the models,
trained on points that nearly all share the location of the first fast one, score
the others by guesswork. In MobileNetV2 tuned with 2,000 trials, three of its
depthwise convolutions had 27-70 measured points at one padding location each, and
moving just that decision of their fastest took 19-49 % off their time. So each ask
proposes first the fastest point's unvisited neighbours that differ from it in one
compute location, the program model's favourites first: as long as the fastest
point stays, every other location of its blocks is measured within a few asks.

A generated space has several designs (a GEMM's: with or without a write cache,
with packed inputs, with the epilogue fused at one tile level or another), and a
mutation never changes the design. Bred from the fastest points alone, a search
kept to the design of its fastest random first point: over three seeds of a GEMM
1024^3 at 64 trials, three different designs, at 229, 349 and 445 GFLOP/s. So the
designs take turns in the random points, and the model-guided batches are shared
among the designs fastest so far, halved down to one (successive halving), once per
equal share of the budget (``max_trials`` over the halvings needed and one more
stretch for the last design, at least ``DESIGN_HALVING_TRIALS``); unless the search
learned from other workloads' records, whose model judges every design from the
first ask. Halving after a fixed 16 measurements instead locked a 1,000-trial GEMM
search to one design at its 48th trial: it spent 950 trials on a design that
reached 344 GFLOP/s, while two 64-trial seeds that kept another reached 386 with it
(``-mcpu=rocketlake``, each run's best re-timed by that run).

Scoring a point with the program's features needs its candidate, a replay of its
trace that costs tens of milliseconds for a blocked convolution, and generations
of a population meet a few hundred points an ask. So the generations are scored
by a second model on the decisions alone (``DecisionFeatures``, microseconds a
point; AutoTVM's knob features), and only the shortlist is replayed: about a fifth
of the replays. The decision model learns from the search's own observations;
a search that has only other workloads' records (transfer, a model's tasks in
their first round) has none, and another space's decisions mean nothing here, so
it learns the program model's scores of one population of random points that
replay, which then start the generations.

A sibling workload is one whose space has the same designs and domains
(``Space.shares_points_with``): the same operator under another elementwise
epilogue, as a ResNet's convolutions with and without the residual add. Its
records are points of this space that mean the same, so the decision model learns
from them as from the search's own (each workload's times relative to its
fastest), and its fastest points join the first population: a task starts where
its sibling's search got to, without replaying a random population.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Container, Iterator, Mapping, Sequence
from time import monotonic
from typing import Any

import numpy as np

from tuner import cost_model
from tuner.cost_model.base import CostModel
from tuner.cost_model.features import DecisionFeatures, FeatureExtractor
from tuner.search import mutators
from tuner.search.base import SearchError, design_rotation, replays
from tuner.search.model_guided import ModelGuidedSearch, log_targets
from tuner.space.base import Decisions, Space

# The features the model reads unless told otherwise: the program's, under 1 ms a point on top
# of making its candidate, which the search does anyway for the points it shortlists.
DEFAULT_FEATURES = "program"
# The largest population the default sizing gives; MetaSchedule's CPU default is 2048,
# but a search with only transfer records replays its first population in Python (about
# 10 ms a point for a knob template, tens for a blocked convolution of a generated space).
POPULATION_SIZE = 512
# The first ask's population per candidate a batch wants, and the floor of every
# population.
POPULATION_PER_CANDIDATE = 2
MIN_POPULATION = 32
# The share of a batch's measuring time that the next ask's breeding (the decision
# model's training and the generations) may take: the population grows while breeding
# costs less, and shrinks when it costs more; by at most POPULATION_STEP times an ask.
BREEDING_SHARE = 0.05
POPULATION_STEP = 4
# Draws per point wanted before a converged population (or a small space) stops.
ATTEMPTS_PER_POINT = 4
# The points per candidate wanted that the decision model's ranking sends to be
# replayed and ranked by the program's model.
SHORTLIST_PER_CANDIDATE = 2
# The fewest measured points between two halvings of the designs a batch is shared
# among (``EvolutionarySearch._kept_designs``).
DESIGN_HALVING_TRIALS = 16
# The share of each batch that the location sweep takes (rounded up), and how many
# of the fastest point's location neighbours per point taken it replays to rank.
SWEEP_SHARE = 0.25
SWEEP_REPLAYS_PER_POINT = 3
# The kind of the decision domains the sweep moves.
COMPUTE_LOCATION = "sample_compute_location"


class EvolutionarySearch(ModelGuidedSearch):
    """``features`` is an extractor or its kind; ``model`` a CostModel (default:
    ``default_model``, XGBoost regression seeded by ``seed``); ``population_size`` the
    points per generation (default: sized by the measuring time, see ``_population``);
    ``generations`` how many times the population breeds per ask; ``elites`` how many
    of the fastest measured points seed it; ``mutation_probabilities`` maps mutator
    kinds to their probability (default ``mutators.DEFAULT_PROBABILITIES``);
    ``epsilon`` the share of each batch drawn at random; ``sweep_share`` the share
    the location sweep takes; ``warmup`` the measurements before the model is used
    (default: one batch)."""

    def __init__(
        self,
        space: Space,
        *,
        features: str | FeatureExtractor = DEFAULT_FEATURES,
        model: CostModel | None = None,
        population_size: int | None = None,
        generations: int = 4,
        elites: int = 16,
        mutation_probabilities: Mapping[str, float] | None = None,
        epsilon: float = 0.05,
        sweep_share: float = SWEEP_SHARE,
        warmup: int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(
            space, features=features, model=model, epsilon=epsilon, warmup=warmup, **options
        )
        if population_size is not None:
            _check_count("population_size", population_size, least=1)
        _check_count("generations", generations, least=0)
        _check_count("elites", elites, least=0)
        if not 0.0 <= sweep_share <= 1.0:
            raise SearchError(f"sweep_share must be in [0, 1], got {sweep_share!r}")
        self.sweep_share = sweep_share
        self.population_size = population_size
        self.generations = generations
        self.elites = elites
        self.mutation = mutators.mix(mutation_probabilities)
        self._screen_features = DecisionFeatures()
        self._screen_model = cost_model.create("xgb", random_state=self.seed)
        # Each sibling workload's measured points and their log throughputs relative
        # to its fastest.
        self._siblings: list[tuple[list[Decisions], np.ndarray]] = []
        # The last ask's points per generation and the seconds its breeding took.
        self._breeding: tuple[int, float] | None = None

    @property
    def population(self) -> int | None:
        """The points per generation of the last ask; None before one bred."""
        return None if self._breeding is None else self._breeding[0]

    def _learn_points(self, space: Space, points: list[Decisions], throughputs: np.ndarray) -> int:
        """Train on another workload's points (see ``ModelGuidedSearch``); when that is a
        sibling workload, whose space shares this one's points, also keep them."""
        taken = super()._learn_points(space, points, throughputs)
        if taken and self.space.shares_points_with(space):
            self._siblings.append((points, log_targets(throughputs)))
        return taken

    def _propose(self, count: int) -> Iterator[Decisions]:
        if not self._model_ready():
            return
        self._fit()
        size = self._population(count)
        designs = self._kept_designs()
        started = monotonic()
        scored = self._fit_screen(size, designs)
        population = list(scored) or self._initial_population(size, designs, legal=False)
        met = self._evolve(population, size, by_design=designs is not None)
        self._breeding = (size, monotonic() - started)
        unscored = {point: score for point, score in met.items() if point not in scored}
        scored.update(self._shortlisted(unscored, SHORTLIST_PER_CANDIDATE * count, designs))
        sweep = self._location_sweep(count)
        ranked = _in_turns(sorted(scored, key=lambda point: -scored[point]), designs)
        self._expect(scored | sweep)
        yield from sweep
        rest = [p for p in ranked if not self.is_visited(p) and p not in sweep]
        yield from self._with_exploration(rest, count - len(sweep))

    def _location_sweep(self, count: int) -> dict[Decisions, float]:
        """The location sweep's points of this ask (see the module docstring), each
        with the program model's score: ``sweep_share`` of ``count`` (rounded up) of
        the fastest measured point's unvisited neighbours in one compute location,
        the best-scored of SWEEP_REPLAYS_PER_POINT times as many that replay, drawn in
        random order."""
        wanted = math.ceil(self.sweep_share * count)
        measured = self.measured()
        if not wanted or not measured:
            return {}
        near = list(self.space.neighbours(measured[0].decisions, kind=COMPUTE_LOCATION))
        self.rng.shuffle(near)
        legal: list[Decisions] = []
        for point in near:
            if len(legal) >= SWEEP_REPLAYS_PER_POINT * wanted:
                break
            if not self.is_visited(point) and replays(self.space, point):
                legal.append(point)
        scores = dict(zip(legal, self._predict(legal).tolist(), strict=True))
        return dict(sorted(scores.items(), key=lambda item: -item[1])[:wanted])

    def _kept_designs(self) -> list[int] | None:
        """The designs this ask shares its batch among, fastest measured first:
        successive halving. Every design until ``_halving_interval`` points were
        measured (this search's and its sibling workloads'), then the faster half of
        them, and half of that again after each further interval, down to one. A
        design's first random points say little of its best, and before this, a search
        bred only from the design of its fastest first point.

        None (every design, without shares) when the search learned from other
        workloads' records that are not its siblings': the model those records taught
        judges every design's points from the first ask, and a model's task, which gets
        a few rounds, would spread them over its six to eight designs."""
        if len(self._transfer) > len(self._siblings):
            return None
        best: dict[int, float] = {}
        groups = self._relative_points(own=bool(self.history))
        for points, targets in groups:
            for point, target in zip(points, targets.tolist(), strict=True):
                best[point.design] = max(target, best.get(point.design, target))
        evidence = sum(len(points) for points, _ in groups)
        designs = self.space.design_count
        halvings = evidence // self._halving_interval(designs)
        ranked = sorted(best, key=lambda d: -best[d])
        ranked += [d for d in range(designs) if d not in best]
        return ranked[: max(1, math.ceil(designs / 2**halvings))]

    def _halving_interval(self, designs: int) -> int:
        """The measured points between two halvings of ``designs``: the budget split
        evenly over the halvings that leave one and the stretch that one gets alone
        (successive halving's schedule), so that a long search compares its designs on
        more points than a short one; at least DESIGN_HALVING_TRIALS."""
        stretches = math.ceil(math.log2(max(designs, 2))) + 1
        return max(DESIGN_HALVING_TRIALS, self.max_trials // stretches)

    def _relative_points(self, *, own: bool) -> list[tuple[list[Decisions], np.ndarray]]:
        """The sibling workloads' measured points, and this search's when ``own``, each
        group with its log throughputs relative to its fastest."""
        groups = list(self._siblings)
        if own:
            points, throughputs = self._observed()
            groups.append((points, log_targets(throughputs)))
        return groups

    def _fit_screen(self, size: int, designs: Sequence[int] | None) -> dict[Decisions, float]:
        """Train the decision model on this search's own observations and its sibling
        workloads' points; without either (only other workloads' records), on ``size``
        random points of ``designs`` (None: any) that replay, scored by the program's
        model, which those records taught: the decisions of another space mean nothing
        here, but the program model's judgement of this space's points does. Returns the
        random points with their scores (none otherwise)."""
        groups = self._relative_points(own=self._warmed_up())
        sampled: dict[Decisions, float] = {}
        if not groups:
            points = self._initial_population(size, designs, legal=True)
            groups.append((points, self._predict(points)))
            sampled = dict(zip(points, groups[0][1].tolist(), strict=True))
        points = [point for group, _ in groups for point in group]
        if points:
            rows = self._screen_features.transform(self.space, points)
            self._screen_model.fit(rows, np.concatenate([targets for _, targets in groups]))
        return sampled

    def _screen_predict(self, points: Sequence[Decisions]) -> np.ndarray:
        """The decision model's score of each point (larger is faster)."""
        if not points:
            return np.zeros(0)
        return self._screen_model.predict(self._screen_features.transform(self.space, points))

    def _shortlisted(
        self, met: dict[Decisions, float], wanted: int, designs: Sequence[int] | None
    ) -> dict[Decisions, float]:
        """Up to ``wanted`` of the unvisited points ``met`` in the generations that
        replay, the ``designs`` in turns (None: any, no turns) and each one's best by
        the decision model first, each with the program model's score."""
        legal: list[Decisions] = []
        for point in _in_turns(sorted(met, key=lambda p: -met[p]), designs):
            if len(legal) >= wanted:
                break
            if not self.is_visited(point) and replays(self.space, point):
                legal.append(point)
        return dict(zip(legal, self._predict(legal).tolist(), strict=True))

    def _population(self, count: int) -> int:
        """The points per generation when ``count`` candidates are wanted: the given
        ``population_size``, else as many as breed in BREEDING_SHARE of the last batch's
        measuring time at the last ask's seconds per point (at most POPULATION_STEP
        times more or fewer than then), between MIN_POPULATION and POPULATION_SIZE. A
        kernel that takes long to build and time buys a larger population; a small one,
        measured in moments, keeps its search from outweighing its measurements. The
        first ask, with nothing timed, takes POPULATION_PER_CANDIDATE per candidate."""
        if self.population_size is not None:
            return self.population_size
        if self._breeding is None or self.measuring_seconds is None:
            wanted = float(POPULATION_PER_CANDIDATE * count)
        else:
            size, seconds = self._breeding
            wanted = size * BREEDING_SHARE * self.measuring_seconds / max(seconds, 1e-9)
            wanted = min(max(wanted, size / POPULATION_STEP), size * POPULATION_STEP)
        return int(min(POPULATION_SIZE, max(MIN_POPULATION, wanted)))

    def _initial_population(
        self, size: int, designs: Sequence[int] | None, *, legal: bool
    ) -> list[Decisions]:
        """Of ``designs`` (None: any): the fastest points measured (``elites`` shared
        among the designs), the ``elites`` fastest unvisited ones of the sibling
        workloads, then random unvisited points (that replay, when ``legal``) up to
        ``size`` (fewer when the space has not that many left)."""
        measured = [o.decisions for o in self.measured()]
        if designs is None:
            population = dict.fromkeys(measured[: self.elites])
        else:
            share = max(1, self.elites // len(designs))
            population = dict.fromkeys(
                point for d in designs for point in [p for p in measured if p.design == d][:share]
            )
        population.update(dict.fromkeys(self._sibling_elites(population, designs)))
        rotation = design_rotation(
            range(self.space.design_count) if designs is None else designs, self.rng
        )
        for _ in range(ATTEMPTS_PER_POINT * size):
            if len(population) >= size:
                break
            point = self.space.random_decisions(self.rng, next(rotation))
            if self._fresh(point, population) and (not legal or replays(self.space, point)):
                population[point] = None
        return list(population)

    def _sibling_elites(
        self, taken: Container[Decisions], designs: Container[int] | None
    ) -> list[Decisions]:
        """The ``elites`` fastest points of ``designs`` (None: any) of the sibling
        workloads (relative to each one's fastest) that are neither visited nor
        ``taken``."""
        ranked = sorted(
            (
                (target, point)
                for points, targets in self._siblings
                for point, target in zip(points, targets.tolist(), strict=True)
            ),
            key=lambda pair: -pair[0],
        )
        elites: dict[Decisions, None] = {}
        for _, point in ranked:
            if len(elites) >= self.elites:
                break
            if (designs is None or point.design in designs) and self._fresh(point, taken):
                elites[point] = None
        return list(elites)

    def _evolve(
        self, population: list[Decisions], size: int, *, by_design: bool
    ) -> dict[Decisions, float]:
        """Every point the generations met, with its score by the decision model (none
        is replayed: ``_shortlisted`` replays the shortlist); ``by_design``: parents
        are drawn by their score relative to their design's best (``_children``)."""
        scored: dict[Decisions, float] = {}
        for _ in range(self.generations):
            scores = self._screen_predict(population)
            scored.update(zip(population, scores.tolist(), strict=True))
            population = self._children(population, scores, size, scored, by_design)
        scored.update(zip(population, self._screen_predict(population).tolist(), strict=True))
        return scored

    def _children(
        self,
        parents: list[Decisions],
        scores: np.ndarray,
        size: int,
        met: Mapping[Decisions, Any],
        by_design: bool,
    ) -> list[Decisions]:
        """Up to ``size`` children not in ``met`` nor visited, each a mutation of a
        parent drawn with probability proportional to its predicted throughput (the
        scores are log throughputs) relative to the best parent's, or ``by_design`` to
        the best parent of its design, so that one design's higher scores do not leave
        the others without children."""
        if not parents:
            return []
        leaders: dict[int, float] = {}
        groups = [p.design if by_design else 0 for p in parents]
        for group, score in zip(groups, scores.tolist(), strict=True):
            leaders[group] = max(score, leaders.get(group, score))
        weights = np.exp(scores - np.array([leaders[g] for g in groups]))
        cumulative = list(itertools.accumulate(weights.tolist()))
        children: dict[Decisions, None] = {}
        for _ in range(ATTEMPTS_PER_POINT * size):
            if len(children) >= size:
                break
            parent = self.rng.choices(parents, cum_weights=cumulative)[0]
            child = self.mutation.mutated(self.space, parent, self.rng)
            if child is not None and child not in met and self._fresh(child, children):
                children[child] = None
        return list(children)

    def _fresh(self, point: Decisions, taken: Container[Decisions]) -> bool:
        """Whether ``point`` is neither measured (or restored) nor already taken."""
        return not self.is_visited(point) and point not in taken


def _in_turns(ranked: Sequence[Decisions], designs: Sequence[int] | None) -> list[Decisions]:
    """The points of ``ranked`` (best first) of ``designs``, the designs taking turns in
    that order, each with its points in ranked order; None: ``ranked`` as it is."""
    if designs is None:
        return list(ranked)
    queues: dict[int, list[Decisions]] = {design: [] for design in designs}
    for point in ranked:
        if point.design in queues:
            queues[point.design].append(point)
    turns = itertools.zip_longest(*queues.values())
    return [point for turn in turns for point in turn if point is not None]


def _check_count(name: str, value: object, *, least: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise SearchError(f"{name} must be an int >= {least}, got {value!r}")
