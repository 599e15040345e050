"""Numerical solvers and simulations: scalar ODEs, entropy/majorization, attention dynamics."""
