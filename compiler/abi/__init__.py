"""How a compiled kernel is called: its parameters and size variables as plain data
(``signature``), which code generation embeds in a module and the runtime checks
arguments against."""
