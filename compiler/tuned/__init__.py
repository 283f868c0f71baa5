"""Building with a tuning database: the best stored schedule of each function looked
up and replayed (``lookup``), and the process's cache of replayed traces (``replay``)."""
