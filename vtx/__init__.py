"""The vtx command line: the composition root that wires infra/ and jobs/ into one CLI.

Nothing in infra/ or jobs/ imports this package; it imports both."""
