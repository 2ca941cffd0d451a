#!/usr/bin/env bash
# benchcmp.sh: the hot-path benchmarks of a base commit and of the working
# tree, run alternately in one go and compared with benchstat.
#
# Usage: scripts/benchcmp.sh [-base REV] [-rounds N] [-benchtime D] [-bench REGEXP] [-out DIR]
#
#   -base REV       the commit to compare with (default: origin/main, else main)
#   -rounds N       runs of each build, alternating base/new (default 6; 12+ for a note
#                   on a busy machine); benchstat wants at least 6 for its intervals
#   -benchtime D    go test -benchtime per benchmark (default 300ms)
#   -bench REGEXP   which hot-path benchmarks, as go test -bench reads it (default HotPath: all
#                   of them; HotPath/^Append$ or 'HotPath/(Request|Resume)' for some)
#   -out DIR        keep the raw results (base.txt, new.txt) and benchstat's table there
#
# The hot-path benchmarks are the files named hotpath_bench_test.go (today
# persistent/ and tokens/). They use only API that older commits have too,
# so the script copies them from the working tree into an export of the
# base (git archive: nothing is registered in the repository): both builds
# run the same benchmark code. A package the base lacks, or whose copy does
# not compile there, is run on the working tree only and said so; its rows
# have no base column.
#
# Each round runs the base's test binaries and the working tree's one after
# the other, in alternating order, so the load of a shared machine falls on
# both alike. The default takes about four minutes on an idle two-core
# machine, twice that or more when other builds load it.
set -euo pipefail

command="$0 $*"
base="" rounds=6 benchtime=300ms bench=HotPath out=""
# benchstat's version: one known to work (see go.mod's Go version).
benchstat_mod=golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
	case "$1" in
	-base) base="$2"; shift 2 ;;
	-rounds) rounds="$2"; shift 2 ;;
	-benchtime) benchtime="$2"; shift 2 ;;
	-bench) bench="$2"; shift 2 ;;
	-out) out="$2"; shift 2 ;;
	-h | -help | --help) usage 0 ;;
	*) echo "benchcmp.sh: unknown argument $1" >&2; usage ;;
	esac
done
case "$rounds" in '' | *[!0-9]* | 0) echo "benchcmp.sh: -rounds wants a positive number, got '$rounds'" >&2; exit 2 ;; esac

root=$(git rev-parse --show-toplevel)
cd "$root"
if [ -z "$base" ]; then
	if git rev-parse -q --verify origin/main >/dev/null; then base=origin/main; else base=main; fi
fi
base_rev=$(git rev-parse --verify -q "$base^{commit}") || { echo "benchcmp.sh: no commit '$base' in $root" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/benchcmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/base" "$tmp/bin" "$tmp/cache/base" "$tmp/cache/new"
git archive "$base_rev" | tar -x -C "$tmp/base"

# Build each package's test binary on both sides.
pkgs=() have_base=()
while IFS= read -r f; do
	pkg=$(dirname "$f")
	name=$(echo "$pkg" | tr / _)
	(cd "$root" && go test -c -o "$tmp/bin/new-$name.test" "./$pkg")
	ok=0
	if [ -d "$tmp/base/$pkg" ]; then
		cp "$f" "$tmp/base/$f"
		if [ ! -d "$tmp/base/storage/boltstore" ] && [ -d "$tmp/base/store" ]; then
			# A base from before the bbolt engine moved to storage/boltstore:
			# the same API under its old name.
			sed -i 's#github.com/ctxstore/ctxstore/storage/boltstore#github.com/ctxstore/ctxstore/store#; s#\bboltstore\.#store.#g' "$tmp/base/$f"
		fi
		if (cd "$tmp/base" && go test -c -o "$tmp/bin/base-$name.test" "./$pkg") 2>"$tmp/build-$name.err"; then
			ok=1
		else
			echo "note: ./$pkg's hot-path benchmarks do not compile on $base; its rows show the working tree only:" >&2
			sed 's/^/    /' "$tmp/build-$name.err" | head -5 >&2
		fi
	else
		echo "note: $base has no ./$pkg; its rows show the working tree only" >&2
	fi
	pkgs+=("$pkg") have_base+=("$ok")
done < <(git ls-files --cached --others --exclude-standard -- '*hotpath_bench_test.go' | sort)
[ ${#pkgs[@]} -gt 0 ] || { echo "benchcmp.sh: no hotpath_bench_test.go in the working tree" >&2; exit 1; }

# run SIDE: one run of every package's binary of SIDE (base or new),
# appended to SIDE.txt. The binaries run in their package's directory of
# that side, as go test would.
run() {
	local side=$1 dir i pkg name
	for i in "${!pkgs[@]}"; do
		pkg=${pkgs[$i]}
		name=$(echo "$pkg" | tr / _)
		if [ "$side" = base ] && [ "${have_base[$i]}" = 0 ]; then continue; fi
		dir="$root/$pkg"
		[ "$side" = base ] && dir="$tmp/base/$pkg"
		(cd "$dir" && CTXSTORE_HOTPATH_CACHE="$tmp/cache/$side" "$tmp/bin/$side-$name.test" \
			-test.run '^$' -test.bench "$bench" -test.benchtime "$benchtime" -test.count 1) >>"$tmp/$side.txt"
	done
}

echo "command: $command" >&2
echo "base $base ($(git rev-parse --short "$base_rev")) vs the working tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ', with uncommitted changes')); $rounds rounds, -benchtime $benchtime, -bench $bench" >&2
for r in $(seq "$rounds"); do
	echo "round $r/$rounds (load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?'))" >&2
	if [ $((r % 2)) = 1 ]; then run base; run new; else run new; run base; fi
done

touch "$tmp/base.txt"
(cd "$tmp" && go run "$benchstat_mod" base=base.txt new=new.txt) | tee "$tmp/benchstat.txt"
if [ -n "$out" ]; then
	mkdir -p "$out"
	cp "$tmp/base.txt" "$tmp/new.txt" "$tmp/benchstat.txt" "$out/"
	echo "raw results and the table are in $out" >&2
fi
