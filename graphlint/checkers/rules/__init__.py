"""The static rules, one module per rule, in a folder per family; discovered by the registry."""
