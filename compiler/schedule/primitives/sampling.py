"""Sampling instructions."""


def sample_perfect_tile(rng, loop, n, max_innermost_factor, decision):
    raise NotImplementedError


def sample_categorical(rng, candidates, probs, decision):
    raise NotImplementedError
