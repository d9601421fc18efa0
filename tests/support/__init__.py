"""What tests share outside fixtures: the types of fixtures, and reads the tests check the package
against, kept out of the package since nothing else uses them."""
