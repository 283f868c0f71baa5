"""decompose_reduction."""


def decompose_reduction(func, block, loop):
    raise NotImplementedError
