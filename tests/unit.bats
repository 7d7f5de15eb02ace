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

@test "ledger unit tests against a real SQLite file" {
	NYX_TEST_TMP=$BATS_TEST_TMPDIR run -0 "$NYX_TESTBIN/test_ledger"
	refute_output --partial "not ok"
}

@test "a ledger from a newer schema is refused (73), an older one migrates" {
	d=$BATS_TEST_TMPDIR/state
	run -0 "$NYX_TESTBIN/test_ledger" open "$d"
	[ "$(sqlite3 "$d/ledger.db" 'PRAGMA user_version')" = 1 ]
	[ "$(sqlite3 "$d/ledger.db" 'PRAGMA journal_mode')" = wal ]
	sqlite3 "$d/ledger.db" 'PRAGMA user_version = 99'
	run -73 "$NYX_TESTBIN/test_ledger" open "$d"
	[[ $output == *ledger_too_new* ]]
}
