"""The static machinery: the file phase (binder, value kinds, flows) that turns one file into a
summary, and the project phase (call graph, capture reach) that judges the rules' candidates.

It knows no rule by name: rules live in `graphlint.checkers.rules`, one module each, and plug
in through the hooks of `machinery.detectors`.
"""
