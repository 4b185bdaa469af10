"""The steps of the schema ladder, one module each; ``ladder.py`` runs them in order of their numbers."""
