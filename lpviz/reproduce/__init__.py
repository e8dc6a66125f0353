"""The papers' figures and tables, each a library function that returns its numbers.

- :mod:`lpviz.reproduce.table1`: Table 1 of the VI paper (MCMC against CAVI
  on a 1000 x 1000 matrix, K = 50, eps/N = 1), ``lpviz table1`` on the CLI.
"""
