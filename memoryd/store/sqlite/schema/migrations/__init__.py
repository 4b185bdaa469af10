"""The steps of the schema ladder, one module each; ``store/schema.py`` runs them in order."""
