"""The ``tensortune`` command line: the argument parser and one module per group of
commands, the tables and the secrets they read. The tuning loop and its data live in
the modules above (``tuner.tune``, ``tuner.model_tune``, the service); none of them
imports this package. The entry point is ``tuner.cli.main.main``, which imports the
commands only when it runs (see its docstring)."""
