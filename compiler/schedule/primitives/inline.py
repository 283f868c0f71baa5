"""compute_inline and reverse_compute_inline."""


def compute_inline(func, block):
    raise NotImplementedError


def reverse_compute_inline(func, block):
    raise NotImplementedError
