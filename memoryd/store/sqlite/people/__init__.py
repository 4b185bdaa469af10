"""People: each owner's people, aliases, merges, and what a memory teaches about them."""
