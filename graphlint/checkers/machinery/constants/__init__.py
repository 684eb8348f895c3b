"""Constants a capture passes down its calls: the tests on parameters the file phase keeps
(`param_tests`) and their evaluation along the capture reach (`call_constants`)."""
