"""Vectors: vector spaces and generations, vec0 tables, quantized copies, the KNN scan."""
