#!/usr/bin/env bats
# Seeded chaos of the durable path (issue 15, item 8): each trial draws a
# random fault plan (drops, 5xx, 429, 409 on /result, answers held past the
# exchange bound, a lost 202), starts 1-3 code-exec runs with random
# programs, kill -9s some clients at random moments, reruns the same
# command lines as cron would, reconciles with exec-status --all --wait,
# and checks: at most one provider execution per logical run, no lost
# result (a provider-terminal outcome is the ledger's final outcome), no
# hang, no secret in any output or state file.
#
# `make check` runs CHAOS_N=6 trials; `make chaos N=200 SEED=…` runs more.
# A failure prints the seed and trial so it can be replayed exactly:
#   make chaos N=1 SEED=<seed> FIRST=<trial>

load helpers/suite

setup() {
	suite_setup "$FIX/code-exec/routes.yaml"
	ALICE_TOK=$(token_file "$ALICE")
	export NYX_BASE_URL=$NYX_TEST_BASE NYX_TOKEN_FILE=$ALICE_TOK
}

# The trial's random draws: bash's RANDOM, reseeded per trial.
pick() { echo $((RANDOM % $1)); }

# One random fault rule on the durable API, as a YAML list item.
fault_rule() {
	local nth=$((1 + $(pick 4))) count=$((1 + $(pick 2)))
	case $(pick 9) in
	0) printf '  - {method: GET, path: "%s/*", nth: %d, count: %d, status: 503}\n' "$P" "$nth" "$count" ;;
	1) printf '  - {method: GET, path: "%s/*", nth: %d, count: %d, status: 429, headers: {Retry-After: "1"}}\n' "$P" "$nth" "$count" ;;
	2) printf '  - {method: GET, path: "%s/*/result", nth: 1, count: %d, status: 409, json: {error: {code: OPERATION_NOT_TERMINAL}}}\n' "$P" "$count" ;;
	3) printf '  - {method: GET, path: "%s/*/result", nth: 1, count: %d, status: %d}\n' "$P" "$count" $((500 + $(pick 4))) ;;
	4) printf '  - {method: GET, path: "%s/*", nth: %d, count: %d, drop: true}\n' "$P" "$nth" "$count" ;;
	5) printf '  - {method: GET, path: "%s/*", nth: %d, delay_ms: 1500}\n' "$P" "$nth" ;;
	6) printf '  - {method: POST, path: "%s", nth: 1, drop_after: true}\n' "$P" ;;
	7) printf '  - {method: POST, path: "%s", nth: 1, delay_after_ms: 1500}\n' "$P" ;;
	8) printf '  - {method: POST, path: "%s", nth: 1, status: 503}\n' "$P" ;;
	esac
}

# fail MSG: report the seed and trial that reproduce it, and fail.
fail_trial() {
	echo "chaos: SEED=$SEED trial $T: $*" >&2
	local f
	for f in "$BATS_TEST_TMPDIR/t$T"/*; do
		[ -f "$f" ] && { echo "--- ${f##*/}"; cat "$f"; } >&2
	done
	echo "chaos: replay with: make chaos N=1 SEED=$SEED FIRST=$T" >&2
	return 1
}

# One trial; its state in its own directory.
trial() {
	local dir=$BATS_TEST_TMPDIR/t$T k i pid rc src
	local -a cmd pids
	RANDOM=$((SEED * 7919 + T))
	mkdir -p "$dir"
	export NYX_STATE_DIR=$dir/state
	{
		echo 'faults:'
		for _ in $(seq 1 $(pick 4)); do fault_rule; done
	} >"$dir/faults.yaml"
	[ "$(wc -l <"$dir/faults.yaml")" -gt 1 ] || echo 'faults: []' >"$dir/faults.yaml"
	put_faults <"$dir/faults.yaml" || fail_trial "fault plan refused"
	k=$((1 + $(pick 3)))
	for i in $(seq 1 "$k"); do
		# python, not bash: code-exec.bats counts nobody's bash
		# processes after its fork bomb, and this file runs beside it
		src="import sys, time; time.sleep(0.$(pick 8)); print(\"out-$T-$i\"); sys.exit($(($(pick 4) == 0)))"
		cmd[i]="code-exec --durable --max-time 1 --request-id chaos-$SEED-$T-$i -l python -e '$src'"
		eval "exec ${cmd[i]}" >"$dir/out.$i.first" 2>&1 </dev/null 3>&- &
		pids[i]=$!
	done
	# kill -9 some clients at random moments
	for i in $(seq 1 "$k"); do
		if [ "$(pick 2)" = 1 ]; then
			sleep "0.$(pick 10)"
			kill -9 "${pids[i]}" 2>/dev/null || true
		fi
	done
	for i in $(seq 1 "$k"); do
		wait "${pids[i]}" 2>/dev/null || true
	done
	# cron reruns the same command lines: they converge, never rerun
	for i in $(seq 1 "$k"); do
		rc=0
		eval "timeout 60 ${cmd[i]}" >"$dir/out.$i.rerun" 2>&1 </dev/null || rc=$?
		[ "$rc" != 124 ] || fail_trial "run $i: the rerun hung"
	done
	rc=0
	timeout 60 exec-status --all --now --wait >"$dir/reconcile.out" 2>&1 </dev/null || rc=$?
	[ "$rc" != 124 ] || fail_trial "exec-status --all --wait hung"
	check_trial "$dir" "$k"
}

check_trial() {
	local dir=$1 k=$2 execs pending prov
	execs=$(ctl "$NYX_TEST_BASE/_nyx/executions")
	# only this trial's operations: the ledger knows their ids
	sqlite3 "$NYX_STATE_DIR/ledger.db" \
		"SELECT operation_id, status, terminal FROM operations WHERE request_id LIKE 'chaos-$SEED-$T-%'" \
		>"$dir/ledger.rows" || fail_trial "the ledger cannot be read"
	[ "$(grep -c . "$dir/ledger.rows")" -le "$k" ] || fail_trial "more ledger operations than runs"
	pending=$(awk -F'|' '$3 != 1' "$dir/ledger.rows")
	[ -z "$pending" ] || fail_trial "operations left pending after --all --wait: $pending"
	# at most one provider execution per logical run (key), each run once
	printf '%s\n' "$execs" | jq -e 'group_by(.key_sha256) | all(length == 1)' >/dev/null ||
		fail_trial "two operations for one idempotency key"
	printf '%s\n' "$execs" | jq -e 'all(.runs <= 1)' >/dev/null ||
		fail_trial "a program ran twice: $execs"
	# no lost result: a provider-terminal operation of this trial is the
	# ledger's final outcome
	while IFS='|' read -r op st term; do
		[ -n "$op" ] || continue
		prov=$(printf '%s\n' "$execs" | jq -r --arg op "$op" '.[] | select(.operation_id == $op) | .status')
		case $prov in
		succeeded | failed | cancelled | timed_out)
			[ "$st" = "$prov" ] && [ "$term" = 1 ] ||
				fail_trial "$op: the provider says $prov, the ledger $st (terminal $term)"
			;;
		esac
	done <"$dir/ledger.rows"
	# no secret anywhere: outputs, the ledger, the audit log
	if grep -rqF -- "$ALICE" "$dir"; then
		fail_trial "the token appears in $(grep -rlF -- "$ALICE" "$dir" | head -n 1)"
	fi
	[ -z "$(ls "$NYX_STATE_DIR/secrets" 2>/dev/null)" ] || fail_trial "secret files left after settling"
}

@test "chaos: seeded faults and kill -9 on the durable path; never twice, nothing lost, no hang" {
	SEED=${CHAOS_SEED:-}
	[ -n "$SEED" ] || SEED=$(date +%s)
	N=${CHAOS_N:-6}
	FIRST=${CHAOS_FIRST:-1}
	echo "# chaos: SEED=$SEED N=$N" >&3
	local start=$SECONDS
	for T in $(seq "$FIRST" $((FIRST + N - 1))); do
		trial
		clear_faults
	done
	echo "# chaos: $N trials, $((SECONDS - start)) s, 0 violations (SEED=$SEED)" >&3
}
