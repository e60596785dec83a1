"""Tools a policy calls while it generates (`tools:` in an rl recipe): the built-in `python` tool on the code
reward's sandbox, a team's functions and environments loaded and checked before anything loads, each call held to
a time limit and its result to a length budget (`smolalign.tools.resolve`)."""
