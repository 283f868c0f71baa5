"""compute_at and reverse_compute_at."""


def compute_at(func, block, loop, preserve_unit_loops):
    raise NotImplementedError


def reverse_compute_at(func, block, loop, preserve_unit_loops):
    raise NotImplementedError


def sample_compute_location(rng, func, block, decision):
    raise NotImplementedError
