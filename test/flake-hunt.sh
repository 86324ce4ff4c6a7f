#!/usr/bin/env bash
# flake-hunt.sh runs the test packages that are not long suites COUNT times
# over, with -race and one -shuffle seed as make test runs them, while the
# long suite LOAD runs again and again beside them, as make test's other
# packages load CI's two cores: a test that passes alone and fails beside
# other work shows here before a new machine shows it. make flake-hunt
# calls it with the tools' environment (see test/README.md).
#
# Usage: flake-hunt.sh GO RACE COUNT SEED LOAD LOGDIR SKIP_PACKAGE...
set -uo pipefail
go=$1 race=$2 count=$3 seed=$4 load=$5 logs=$6
shift 6
mkdir -p "$logs"
skip=()
for p in "$@"; do skip+=(-e "$p"); done
mapfile -t fast < <("$go" list ./... | grep -vxF "${skip[@]}")

echo "flake-hunt: ${#fast[@]} packages, -count=$count -shuffle=$seed, beside $load again and again"
rm -f "$logs"/load-*.log "$logs/stop"
(
	i=0
	while [ ! -e "$logs/stop" ]; do
		i=$((i + 1))
		if "$go" test $race -count=1 -shuffle="$seed" "$load" >"$logs/load-$i.log" 2>&1; then
			echo "flake-hunt: $load run $i: ok"
		else
			echo "flake-hunt: $load run $i: FAIL ($logs/load-$i.log)"
			grep -E '^\s*--- FAIL|_test.go:[0-9]+:' "$logs/load-$i.log" | head -20
		fi
	done
) &
loader=$!

status=0
# go test's 10-minute timeout is for one run of a package: ten runs of the
# slower ones (the agent's hand-offs, sync/memcached) under load take more.
"$go" test $race -count="$count" -timeout=90m -shuffle="$seed" "${fast[@]}" 2>&1 | tee "$logs/fast.log" || status=1
touch "$logs/stop"
echo "flake-hunt: the packages are done; waiting for the run of $load in progress"
wait "$loader"
if grep -q FAIL "$logs"/load-*.log 2>/dev/null; then
	status=1
fi
runs=$(ls "$logs"/load-*.log | wc -l)
failed=$(grep -l '^FAIL' "$logs"/load-*.log 2>/dev/null | wc -l)
echo "flake-hunt: $load passed $((runs - failed)) of $runs runs beside the packages"
if [ "$status" -ne 0 ]; then
	echo "flake-hunt: FAIL (logs in $logs); replay the order with -shuffle=$seed"
	exit 1
fi
echo "flake-hunt: every package passed $count times"
