#!/usr/bin/env bats
# The C unit tests of the pure functions (tests/unit/test_*.c).

load helpers/common

@test "route classification unit tests" {
	run -0 "$NYX_TESTBIN/test_route"
	refute_output --partial "not ok"
}

@test "plumbing unit tests (credentials, redaction, time, digests, YAML)" {
	run -0 "$NYX_TESTBIN/test_plumbing"
	refute_output --partial "not ok"
}

@test "nyx-sandboxd fault plan unit tests (parse, nth/count matching)" {
	run -0 "$NYX_TESTBIN/test_sandboxd_fault"
	refute_output --partial "not ok"
}

@test "route repair unit tests (scope merge, set comparison, outcomes)" {
	run -0 "$NYX_TESTBIN/test_converge"
	refute_output --partial "not ok"
}

@test "audit trail unit tests: batched appends against a real ledger and file" {
	NYX_TEST_TMP=$BATS_TEST_TMPDIR run -0 "$NYX_TESTBIN/test_audit"
	refute_output --partial "not ok"
}

@test "ledger unit tests against a real SQLite file" {
	NYX_TEST_TMP=$BATS_TEST_TMPDIR run -0 "$NYX_TESTBIN/test_ledger"
	refute_output --partial "not ok"
}

@test "a ledger from a newer schema is refused (73), an older one migrates" {
	d=$BATS_TEST_TMPDIR/state
	run -0 "$NYX_TESTBIN/test_ledger" open "$d"
	[ "$(sqlite3 "$d/ledger.db" 'PRAGMA user_version')" = 5 ]
	[ "$(sqlite3 "$d/ledger.db" 'PRAGMA journal_mode')" = wal ]
	# a schema-1 ledger with an operation in it migrates, keeping the row
	o=$BATS_TEST_TMPDIR/old
	mkdir -m 700 "$o"
	sqlite3 "$o/ledger.db" "CREATE TABLE operations (handle TEXT PRIMARY KEY,
	  user_service_id TEXT NOT NULL, slug TEXT NOT NULL, base_url TEXT NOT NULL,
	  language TEXT NOT NULL, timeout_secs INTEGER NOT NULL,
	  operation_id TEXT NOT NULL DEFAULT '', status TEXT NOT NULL,
	  phase TEXT NOT NULL DEFAULT '', etag TEXT NOT NULL DEFAULT '',
	  created_at_ms INTEGER NOT NULL, expires_at_ms INTEGER NOT NULL,
	  next_poll_at_ms INTEGER NOT NULL,
	  recovery_until_ms INTEGER NOT NULL DEFAULT 0,
	  stop_deadline_ms INTEGER NOT NULL DEFAULT 0,
	  retry_delay_ms INTEGER NOT NULL DEFAULT 0,
	  terminal INTEGER NOT NULL DEFAULT 0, secret_name TEXT NOT NULL,
	  secret_sha256 TEXT NOT NULL, lease_owner TEXT,
	  lease_until_ms INTEGER NOT NULL DEFAULT 0);
	  INSERT INTO operations (handle, user_service_id, slug, base_url, language,
	  timeout_secs, status, created_at_ms, expires_at_ms, next_poll_at_ms,
	  secret_name, secret_sha256) VALUES ('h-old', 'svc', 'chrono-sandbox',
	  'http://127.0.0.1:1', 'python', 5, 'running', 1, 2, 3, 'h-old', 'x');
	  PRAGMA user_version = 1;"
	chmod 700 "$o"
	run -0 "$NYX_TESTBIN/test_ledger" open "$o"
	[ "$(sqlite3 "$o/ledger.db" 'PRAGMA user_version')" = 5 ]
	[ "$(sqlite3 "$o/ledger.db" "SELECT status || ',' || child_exit || ',' || submits || ',' || updated_at_ms FROM operations WHERE handle = 'h-old'")" = "running,-1,0,0" ]
	sqlite3 "$d/ledger.db" 'PRAGMA user_version = 99'
	run -73 "$NYX_TESTBIN/test_ledger" open "$d"
	[[ $output == *ledger_too_new* ]]
}

@test "codex unit tests (admission, managed and SSH tables, approval gate)" {
	NYX_TEST_TMP=$BATS_TEST_TMPDIR run -0 "$NYX_TESTBIN/test_codex"
	refute_output --partial "not ok"
}

@test "durable state machine unit tests (WIRE 5 and 7 rows, begin, key)" {
	run -0 "$NYX_TESTBIN/test_durable"
	refute_output --partial "not ok"
}

@test "Chrono sync classifier unit tests (WIRE 4.3, 4.4 table)" {
	run -0 "$NYX_TESTBIN/test_chrono"
	refute_output --partial "not ok"
}

@test "job admission unit tests (language, timeout, source size and UTF-8)" {
	run -0 "$NYX_TESTBIN/test_exec"
	refute_output --partial "not ok"
}
