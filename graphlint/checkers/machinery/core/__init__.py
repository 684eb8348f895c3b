"""The file-phase core: the binder (one function walked in statement order on the flow
skeleton), the value kinds it gives expressions (`kinds`, `kind_inference`), names, syntax,
call naming, capture state and the per-file model. The core imports no flow and no part of
the value flow; the flows lend it what it needs through `module_state.FlowHooks`, which the
file phase (`summarize`) wires."""
