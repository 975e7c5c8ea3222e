#!/bin/sh
# The per-map benchmark table: every Quake 3 map of Debian's OpenArena
# packages (the six development maps first), bspq side by side with parry3d
# (in `bspq bench`) and with Embree 3 (an out-of-process harness, compiled
# here when libembree-dev is installed) on the same queries, one thread.
#
#   benches/maps/run.sh [OUT_DIR] [MAP ...]      (MAP: a map name; default all)
#
# Environment: BSPQ (the binary; default: cargo build --release and use it),
# DEV_MAPS (folder of the six development maps' .bsp files; default
# /work/shared/maps, else tests/data/maps for the three committed ones),
# PAK_DIRS (folders of .pk3 archives, read in name order; default Debian's
# /usr/share/games/openarena/baseoa), COUNT (queries per file, 20000), RUNS
# (timed runs per engine per round, 3), ROUNDS (rounds per map, 2: bench and
# Embree alternate, each ratio taken within a round), MIN_RUN_MS (100).
#
# Writes OUT_DIR/NAME/{rays,boxes}.jsonl, features.json, inspect.txt,
# bench-{rays,boxes}-ROUND.json, embree-ROUND.json, mesh.obj (deleted after
# use), then OUT_DIR/table.md (maps.py table) and OUT_DIR/summary.json.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-$repo/target/maps-bench}
[ $# -gt 0 ] && shift
mkdir -p "$out"
out=$(cd "$out" && pwd)

COUNT=${COUNT:-20000}
RUNS=${RUNS:-3}
ROUNDS=${ROUNDS:-2}
MIN_RUN_MS=${MIN_RUN_MS:-100}
PAK_DIRS=${PAK_DIRS:-/usr/share/games/openarena/baseoa}
if [ -z "${DEV_MAPS:-}" ]; then
    if [ -d /work/shared/maps ]; then DEV_MAPS=/work/shared/maps; else DEV_MAPS=$repo/tests/data/maps; fi
fi
if [ -z "${BSPQ:-}" ]; then
    (cd "$repo" && cargo build --release --quiet)
    BSPQ=$repo/target/release/bspq
fi

embree=""
if [ -f /usr/include/embree3/rtcore.h ]; then
    gcc -O2 -o "$out/embree_rays" "$here/embree_rays.c" -lembree3 -lm
    embree=$out/embree_rays
else
    echo "run.sh: Embree 3 not found (apt-get install libembree-dev): no Embree columns" >&2
fi

# shellcheck disable=SC2086
python3 "$here/maps.py" list "$DEV_MAPS" $PAK_DIRS > "$out/maps.all"
if [ $# -gt 0 ]; then
    : > "$out/maps.txt"
    for name in "$@"; do
        grep -i "^$name " "$out/maps.all" >> "$out/maps.txt" || echo "run.sh: no map $name" >&2
    done
else
    cp "$out/maps.all" "$out/maps.txt"
fi

{
    echo "started $(date -u +%FT%TZ) on $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "bspq $BSPQ; COUNT=$COUNT RUNS=$RUNS ROUNDS=$ROUNDS MIN_RUN_MS=$MIN_RUN_MS"
} > "$out/conditions.txt"

bench() { # KIND ROUND [extra options]
    kind=$1 round=$2
    shift 2
    "$BSPQ" bench --world "$world" --queries "$dir/$kind.jsonl" --json --threads 1 \
        --runs "$RUNS" --min-run-ms "$MIN_RUN_MS" --batch 4096 --no-shapes "$@" \
        > "$dir/bench-$kind-$round.json" 2> "$dir/bench-$kind-$round.log" ||
        echo "run.sh: $name: bspq bench $kind failed (see $dir/bench-$kind-$round.log)" >&2
}
embree_run() { # ROUND
    [ -n "$embree" ] || return 0
    "$embree" "$dir/mesh.obj" "$dir/rays.jsonl" "$RUNS" "$MIN_RUN_MS" > "$dir/embree-$1.json" ||
        echo "run.sh: $name: the Embree harness failed" >&2
}

total=$(wc -l < "$out/maps.txt")
n=0
while read -r name world; do
    n=$((n + 1))
    dir=$out/$name
    mkdir -p "$dir"
    echo "[$n/$total] $name  $(date -u +%T)  load $(cut -d' ' -f1 /proc/loadavg)" >&2
    if ! python3 "$here/maps.py" features "$world" > "$dir/features.json" ||
        ! "$BSPQ" inspect --world "$world" > "$dir/inspect.txt" 2>&1 ||
        ! "$BSPQ" workload --world "$world" --kind rays --count "$COUNT" > "$dir/rays.jsonl" ||
        ! "$BSPQ" workload --world "$world" --kind boxes --count "$COUNT" > "$dir/boxes.jsonl"; then
        echo "run.sh: $name: cannot read the map or make its queries; skipped" >&2
        continue
    fi
    rm -f "$dir"/bench-*.json "$dir"/embree-*.json
    round=1
    while [ "$round" -le "$ROUNDS" ]; do
        # The first round also counts the work per query and writes the
        # mesh; Embree runs after bspq in odd rounds and before it in even.
        if [ "$round" -eq 1 ]; then
            bench rays 1 --stats --mesh-obj "$dir/mesh.obj"
            embree_run 1
            bench boxes 1 --stats
        elif [ $((round % 2)) -eq 0 ]; then
            embree_run "$round"
            bench rays "$round"
            bench boxes "$round"
        else
            bench rays "$round"
            embree_run "$round"
            bench boxes "$round"
        fi
        round=$((round + 1))
    done
    rm -f "$dir/mesh.obj"
done < "$out/maps.txt"

echo "finished $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/conditions.txt"
python3 "$here/maps.py" table "$out" > "$out/table.md"
echo "run.sh: $out/table.md" >&2
