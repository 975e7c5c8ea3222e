#!/usr/bin/env python3
"""Make the committed oracle subsets under tests/data/oracle/ (see README.md there).

Usage: python3 tests/data/make_oracle_subset.py [ORACLE_DIR]
ORACLE_DIR defaults to ../shared/oracle relative to the repository root
(/work/shared/oracle in the development setup). Only this script reads it;
the tests read the committed subsets.

For each committed map (tests/data/maps/*.bsp that has an oracle folder):
- rays, boxes, points: every STEP-th line (lines 0, STEP, 2*STEP, ... — 2 000
  of 20 000), with the matching lines of every expected file (curves on and
  off) and of kinds.txt (its "# rays" / "# boxes" header lines are kept);
- extras: every line, with extras.kinds.txt and both expected files;
- scene: every scene line ({"entities":[…]}) and every STEP-th query line,
  with the matching lines of both expected files and of scene.kinds.txt;
- moves: every MOVES_STEP-th line (1 250 of 25 000), with the matching lines
  of its expected file(s) and of moves.kinds.txt.
Output is gzip with mtime 0, so reruns are byte-identical.
"""

import gzip
import os
import sys

MAPS = ["oa_ctf2", "q3dm6ish", "aggressor"]
STEP = 10
MOVES_STEP = 20
SAMPLED_SETS = ["rays", "boxes", "points"]

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def read(path):
    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def write(path, lines):
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as f:
            f.write("".join(line + "\n" for line in lines).encode("utf-8"))


def subset_map(src, dst):
    os.makedirs(dst, exist_ok=True)
    picked = {}
    for name in sorted(os.listdir(src)):
        if not name.endswith(".jsonl.gz"):
            continue
        set_name = name.split(".", 1)[0]
        if set_name in ("scene", "moves"):
            continue
        lines = read(os.path.join(src, name))
        if set_name in SAMPLED_SETS:
            out = lines[::STEP]
            picked[set_name] = (len(lines), len(out))
        elif set_name == "extras":
            out = lines
        else:
            raise SystemExit(f"unexpected file {name} in {src}")
        write(os.path.join(dst, name), out)

    # kinds.txt: "# rays", one kind per ray, "# boxes", one kind per box.
    kinds = read(os.path.join(src, "kinds.txt.gz"))
    sections, current = {}, None
    for line in kinds:
        if line.startswith("#"):
            current = line[1:].strip()
            sections[current] = []
        else:
            sections[current].append(line)
    out = []
    for set_name in ("rays", "boxes"):
        total, _ = picked[set_name]
        if len(sections[set_name]) != total:
            raise SystemExit(f"{src}: kinds for {set_name} do not match its query count")
        out.append("# " + set_name)
        out.extend(sections[set_name][::STEP])
    write(os.path.join(dst, "kinds.txt.gz"), out)
    write(os.path.join(dst, "extras.kinds.txt.gz"), read(os.path.join(src, "extras.kinds.txt.gz")))
    picked["scene"] = subset_scene(src, dst)
    picked["moves"] = subset_moves(src, dst)
    return picked


def subset_scene(src, dst):
    """Scene lines all kept (each sets the scene of the lines after it)."""
    queries = read(os.path.join(src, "scene.jsonl.gz"))
    keep, seen = [], 0
    for i, line in enumerate(queries):
        if line.startswith('{"entities"'):
            keep.append(i)
        else:
            if seen % STEP == 0:
                keep.append(i)
            seen += 1
    for name in ("scene.jsonl.gz", "scene.expected.jsonl.gz",
                 "scene.nocurves.expected.jsonl.gz", "scene.kinds.txt.gz"):
        lines = read(os.path.join(src, name))
        if len(lines) != len(queries):
            raise SystemExit(f"{src}/{name}: {len(lines)} lines for {len(queries)} queries")
        write(os.path.join(dst, name), [lines[i] for i in keep])
    return (len(queries), len(keep))


def subset_moves(src, dst):
    """Every MOVES_STEP-th movement line; the reference's movement answers
    may exist with curves on only."""
    queries = read(os.path.join(src, "moves.jsonl.gz"))
    for name in ("moves.jsonl.gz", "moves.expected.jsonl.gz",
                 "moves.nocurves.expected.jsonl.gz", "moves.kinds.txt.gz"):
        path = os.path.join(src, name)
        if not os.path.exists(path) and "nocurves" in name:
            continue
        lines = read(path)
        if len(lines) != len(queries):
            raise SystemExit(f"{src}/{name}: {len(lines)} lines for {len(queries)} queries")
        write(os.path.join(dst, name), lines[::MOVES_STEP])
    return (len(queries), len(queries[::MOVES_STEP]))


def main():
    src_root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(REPO), "shared", "oracle")
    dst_root = os.path.join(HERE, "oracle")
    for m in MAPS:
        picked = subset_map(os.path.join(src_root, m), os.path.join(dst_root, m))
        extras = len(read(os.path.join(dst_root, m, "extras.jsonl.gz")))
        print(m, {k: v[1] for k, v in picked.items()}, "extras", extras)


if __name__ == "__main__":
    main()
