"""Reads the tests check the package against, kept out of the package since nothing else uses them."""
