"""What code is generated for, below every folder that needs to know: CPU targets and
the LLVM state they share (``llvm``, with the CPUs and features LLVM knows in
``llvm_catalogue``), GPU targets (``cuda``), and reading any target string
(``parse``)."""
