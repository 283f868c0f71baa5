"""The one exception hierarchy of the tuning database."""


class DatabaseError(Exception):
    """Anything the database refuses or cannot do; nothing stored was changed."""


class RecordError(DatabaseError):
    """A record (or workload, or import line) that is malformed or does not fit what is
    stored: an unknown workload, a trace that does not replay, a bad run time."""


class QuotaError(DatabaseError):
    """A token's quota of unfinished jobs is used: the job was not stored."""


class ConnectError(DatabaseError):
    """The database URL cannot be opened or reached."""


class SchemaError(DatabaseError):
    """The database's schema is not the revision this tensortune needs."""


class StorageError(DatabaseError):
    """The database's storage failed under a statement: a read-only file, damaged
    pages, a lock held past the busy timeout, a server gone away."""
