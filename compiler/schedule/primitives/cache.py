"""cache_read and cache_write."""


def cache_read(func, block, read_buffer_index, storage_scope):
    raise NotImplementedError


def cache_write(func, block, write_buffer_index, storage_scope):
    raise NotImplementedError
