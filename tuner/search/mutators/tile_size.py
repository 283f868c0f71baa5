"""Tile size: move a prime factor from one tile of a perfect tiling to another (TVM
MetaSchedule's MutateTileSize), so the product stays the loop's extent and the
change is small: a tile halves, another doubles."""

from __future__ import annotations

import random
from typing import Any

from compiler.schedule.primitives.sampling import prime_factors
from tuner.search.mutators.base import Mutator
from tuner.space.base import Domain


class TileSizeMutator(Mutator):
    name = "tile_size"

    def applies_to(self, domain: Domain) -> bool:
        return domain.kind == "sample_perfect_tile" and len(domain) > 1

    def mutate(self, domain: Domain, value: Any, rng: random.Random) -> Any | None:
        """A random move that lands on a tiling of the domain (a space may bound the
        innermost tile); None when no move does."""
        moves = sorted(_moves(tuple(value)))
        rng.shuffle(moves)
        for tiles in moves:
            if domain.position(tiles) is not None:
                return tiles
        return None


def _moves(tiles: tuple[int, ...]) -> set[tuple[int, ...]]:
    """Every tiling one prime factor away from ``tiles``."""
    found = set()
    for source, tile in enumerate(tiles):
        for prime in set(prime_factors(tile)):
            for target in range(len(tiles)):
                if target != source:
                    moved = list(tiles)
                    moved[source] //= prime
                    moved[target] *= prime
                    found.add(tuple(moved))
    return found
