"""The opt-in value flow (`--follow-values`): the callables, classes, instances and containers
each location may hold, recorded per file (`value_facts`) and solved over the project
(`value_flow`). `value_` names this system only."""
