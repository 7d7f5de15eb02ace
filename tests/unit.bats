#!/usr/bin/env bats
# The C unit tests of the pure functions (tests/unit/test_*.c).

load helpers/common

@test "route classification unit tests" {
	run -0 "$NYX_TESTBIN/test_route"
	refute_output --partial "not ok"
}

@test "plumbing unit tests (credentials, redaction, time, digests, YAML, faults)" {
	run -0 "$NYX_TESTBIN/test_plumbing"
	refute_output --partial "not ok"
}

@test "route repair unit tests (scope merge, set comparison, outcomes)" {
	run -0 "$NYX_TESTBIN/test_converge"
	refute_output --partial "not ok"
}
