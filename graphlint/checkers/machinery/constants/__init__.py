"""What a capture's callers decide about the code it runs: the constants it passes down its
calls, the tests on parameters the file phase keeps (`param_tests`) and their evaluation along
the capture reach (`call_constants`), and the state built before any capture
(`lazy_singletons`)."""
