#!/usr/bin/env python3
"""Helpers of benches/maps/run.sh (standard library only).

  maps.py list DEV_DIR PAK_DIR...      one line per map: NAME WORLD (the six
                                       development maps first, from DEV_DIR;
                                       then every maps/*.bsp of the .pk3 files,
                                       a later archive's map replacing an
                                       earlier one of the same name)
  maps.py features WORLD               one JSON line: the map's brush, patch
                                       and bounds figures, read from the .bsp
  maps.py table RESULTS_DIR            the per-map table, its distribution and
                                       the features' rank correlations (markdown)
"""
import glob
import json
import math
import os
import struct
import sys
import zipfile

DEV_MAPS = ["oa_dm1", "oa_dm4", "oa_ctf2", "q3dm6ish", "aggressor", "delta"]

CONTENTS_SOLID = 0x1
CONTENTS_PLAYERCLIP = 0x10000
CONTENTS_DETAIL = 0x8000000
MST_PATCH = 2


def list_maps(dev_dir, pak_dirs):
    rows = []
    for name in DEV_MAPS:
        path = os.path.join(dev_dir, name + ".bsp")
        if os.path.exists(path):
            rows.append((name, path))
    found = {}
    for pak_dir in pak_dirs:
        # The engine reads a folder's archives in name order; a later one wins.
        for pak in sorted(glob.glob(os.path.join(pak_dir, "*.pk3"))):
            with zipfile.ZipFile(pak) as z:
                for entry in z.namelist():
                    folder, _, file = entry.rpartition("/")
                    if folder.lower() == "maps" and file.lower().endswith(".bsp"):
                        found[file[:-4].lower()] = (file[:-4], f"{pak}:{entry}")
    for key in sorted(found):
        name, world = found[key]
        if key not in DEV_MAPS:
            rows.append((name, world))
    for name, world in rows:
        print(name, world)


def read_bsp(world):
    if ".pk3:" in world:
        pak, entry = world.split(".pk3:", 1)
        with zipfile.ZipFile(pak + ".pk3") as z:
            return z.read(entry)
    with open(world, "rb") as f:
        return f.read()


def features(world):
    data = read_bsp(world)
    magic, version = struct.unpack_from("<4si", data, 0)
    if magic != b"IBSP" or version != 46:
        raise SystemExit(f"{world}: not a Quake 3 IBSP v46 map")
    lumps = [struct.unpack_from("<ii", data, 8 + 8 * i) for i in range(17)]

    def records(lump, size):
        off, length = lumps[lump]
        return [data[off + i * size: off + (i + 1) * size] for i in range(length // size)]

    shaders = [struct.unpack_from("<ii", r, 64) for r in records(1, 72)]  # flags, contents
    models = [struct.unpack_from("<6f4i", r) for r in records(7, 40)]
    brushes = [struct.unpack_from("<3i", r) for r in records(8, 12)]
    surfaces = records(13, 104)
    m = models[0]
    mins, maxs = m[0:3], m[3:6]
    first_surface, num_surfaces, first_brush, num_brushes = m[6:10]

    def contents(shader):
        return shaders[shader][1] if 0 <= shader < len(shaders) else 0

    world_brushes = brushes[first_brush:first_brush + num_brushes]
    solid = [b for b in world_brushes if contents(b[2]) & CONTENTS_SOLID]
    detail = [b for b in solid if contents(b[2]) & CONTENTS_DETAIL]
    clip = [b for b in world_brushes if contents(b[2]) & CONTENTS_PLAYERCLIP and not contents(b[2]) & CONTENTS_SOLID]
    patches = 0
    solid_patches = 0
    patch_points = 0
    for r in surfaces[first_surface:first_surface + num_surfaces]:
        shader, _fog, kind = struct.unpack_from("<3i", r, 0)
        if kind != MST_PATCH:
            continue
        patches += 1
        if contents(shader) & CONTENTS_SOLID:
            solid_patches += 1
            w, h = struct.unpack_from("<2i", r, 96)
            patch_points += w * h
    # Detail brushes leave no mark in a compiled map (q3map2 drops the flag):
    # small brushes and crowded leaves stand for them.
    planes = [struct.unpack_from("<4f", r) for r in records(2, 16)]
    sides = [struct.unpack_from("<2i", r) for r in records(9, 8)]
    small = 0
    for first_side, num_sides, _shader in solid:
        lo, hi = [-1e9] * 3, [1e9] * 3
        for plane, _ in sides[first_side:first_side + num_sides]:
            nx, ny, nz, dist = planes[plane]
            for axis, n in enumerate((nx, ny, nz)):
                if n == 1.0:
                    hi[axis] = min(hi[axis], dist)
                elif n == -1.0:
                    lo[axis] = max(lo[axis], -dist)
        extent = sorted(hi[a] - lo[a] for a in range(3))
        small += extent[1] <= 16.0  # thin in two axes: trims, pipes, rails
    leaves = [struct.unpack_from("<12i", r) for r in records(4, 48)]
    with_brushes = [l[11] for l in leaves if l[11] > 0]
    size = [maxs[i] - mins[i] for i in range(3)]
    volume = size[0] * size[1] * size[2]
    out = {
        "world_brushes": len(world_brushes),
        "solid_brushes": len(solid),
        "detail_brushes": len(detail),
        "detail_share": len(detail) / max(1, len(solid)),
        "clip_brushes": len(clip),
        "small_share": small / max(1, len(solid)),
        "leaf_brushes_mean": sum(with_brushes) / max(1, len(with_brushes)),
        "leaf_brushes_max": max(with_brushes, default=0),
        "mean_sides": sum(b[1] for b in solid) / max(1, len(solid)),
        "patches": patches,
        "solid_patches": solid_patches,
        "patch_points": patch_points,
        "size": size,
        "volume_mu3": volume / 1e6,
        "diagonal": math.sqrt(sum(s * s for s in size)),
        "brushes_per_mu3": len(solid) / max(1e-9, volume / 1e6),
    }
    print(json.dumps(out))


def load_results(results_dir):
    rows = []
    for name_world in open(os.path.join(results_dir, "maps.txt")):
        name = name_world.split()[0]
        d = os.path.join(results_dir, name)
        if not os.path.isdir(d):
            continue
        row = {"name": name}
        try:
            row["features"] = json.load(open(os.path.join(d, "features.json")))
        except (OSError, ValueError):
            continue
        row["inspect"] = parse_inspect(os.path.join(d, "inspect.txt"))
        for kind in ("rays", "boxes"):
            row[kind] = [json.loads(open(p).read().strip().splitlines()[-1])
                         for p in sorted(glob.glob(os.path.join(d, f"bench-{kind}-*.json")))
                         if os.path.getsize(p) > 0]
        # Counts from a separate untimed pass (bspq bench --stats), if any.
        row["walk"] = [json.loads(open(p).read().strip().splitlines()[-1])
                       for p in glob.glob(os.path.join(d, "walk-*.json")) if os.path.getsize(p) > 0]
        row["embree"] = [json.loads(open(p).read().strip())
                         for p in sorted(glob.glob(os.path.join(d, "embree-*.json")))
                         if os.path.getsize(p) > 0]
        if row["rays"] and row["boxes"]:
            rows.append(row)
    return rows


def parse_inspect(path):
    out = {}
    try:
        text = open(path).read()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, rest = line.partition("  ")
        rest = rest.strip()
        words = rest.split()
        if key == "axial boxes" and len(words) >= 3:
            out["axial_boxes"], out["kernel_brushes"] = int(words[0]), int(words[2])
        elif key == "patch facets" and words:
            out["facets"] = int(words[0])
        elif key == "tree nodes" and words:
            out["tree_nodes"] = int(words[0])
        elif key == "eight-wide BVH" and words:
            out["bvh8_brush_nodes"] = int(words[0])
    return out


def median(v):
    v = sorted(x for x in v if not math.isnan(x))
    n = len(v)
    if not n:
        return float("nan")
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def quantile(v, q):
    v = sorted(v)
    if not v:
        return float("nan")
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def cpu(bench, key):
    """A rate per CPU-second; NaN where the run has none (bench reports
    null when it could not read the CPU clock for a run)."""
    e = bench.get(key)
    value = e.get("cpu_median") if isinstance(e, dict) else None
    return float("nan") if value is None else value


def ratio(a, b):
    return a / b if b and not math.isnan(b) else float("nan")


def summarise(row):
    """Each ratio is taken within a round (a bench run and the Embree run
    beside it), then the median over rounds."""
    s = {"name": row["name"]}
    rays, boxes, embree = row["rays"], row["boxes"], row["embree"]
    rounds = min(len(rays), len(embree))
    single_e, batch_e, any_e, single_p, box_p, box_batch_p = [], [], [], [], [], []
    for i in range(rounds):
        r, e = rays[i], embree[i]
        single_e.append(ratio(cpu(r, "bspq"), e["intersect1_cpu_median"]))
        batch_e.append(ratio(cpu(r, "bspq_batch"), e["intersect1_cpu_median"]))
        any_e.append(ratio(cpu(r, "bspq_anyhit"), e["occluded1_cpu_median"]))
    for r in rays:
        single_p.append(ratio(cpu(r, "bspq"), cpu(r, "parry")))
    for b in boxes:
        box_p.append(ratio(cpu(b, "bspq"), cpu(b, "parry")))
        box_batch_p.append(ratio(cpu(b, "bspq_batch"), cpu(b, "parry")))
    s.update({
        "single_embree": median(single_e), "batch_embree": median(batch_e),
        "anyhit_embree": median(any_e), "rays_parry": median(single_p),
        "boxes_parry": median(box_p), "boxes_batch_parry": median(box_batch_p),
        "bspq_rays_qps": median([cpu(r, "bspq") for r in rays]),
        "embree_qps": median([e["intersect1_cpu_median"] for e in embree]) if embree else float("nan"),
        "rounds": rounds,
    })
    walk = {}
    for r in rays + row["walk"]:
        walk.update(r.get("walk_by_kind") or {})
    bwalk = next((b["walk_by_kind"] for b in boxes if b.get("walk_by_kind")), {})
    def get(w, kind, field):
        value = w.get(kind, {}).get(field)
        return value.get("mean", float("nan")) if isinstance(value, dict) else float("nan")

    s["ray_bvh_nodes"] = get(walk, "rays", "bvh_nodes")
    s["ray_brushes"] = get(walk, "rays", "brushes")
    s["ray_patches"] = get(walk, "rays", "patches")
    s["ray_fallbacks"] = get(walk, "rays", "fallbacks")
    s["anyhit_bvh_nodes"] = get(walk, "anyhit", "bvh_nodes")
    s["anyhit_core_stops"] = get(walk, "anyhit", "core_stops")
    s["walk_nodes"] = get(walk, "reference_rays", "nodes")
    s["walk_leaves"] = get(walk, "reference_rays", "leaves")
    s["walk_brushes"] = get(walk, "reference_rays", "brushes")
    s["box_bvh_nodes"] = get(bwalk, "boxes", "bvh_nodes")
    s["box_brushes"] = get(bwalk, "boxes", "brushes")
    s["sifted"] = rays[0].get("batch_sifted", float("nan"))
    s["box_sifted"] = boxes[0].get("batch_sifted", float("nan"))
    s["bspq_boxes_qps"] = median([cpu(b, "bspq") for b in boxes])
    s["parry_boxes_qps"] = median([cpu(b, "parry") for b in boxes])
    if embree:
        s["hit_share"] = embree[0]["hit_share"]
        s["mean_length"] = embree[0]["mean_length"]
        s["triangles"] = embree[0]["triangles"]
    f, ins = row["features"], row["inspect"]
    s.update({k: f[k] for k in ("solid_brushes", "small_share", "leaf_brushes_mean", "solid_patches", "mean_sides",
                                "volume_mu3", "diagonal", "brushes_per_mu3")})
    s["facets"] = ins.get("facets", float("nan"))
    s["axial_share"] = ins.get("axial_boxes", 0) / max(1, ins.get("kernel_brushes", 1))
    s["tree_nodes"] = ins.get("tree_nodes", float("nan"))
    return s


def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2
        i = j + 1
    return r


def spearman(x, y):
    pairs = [(a, b) for a, b in zip(x, y) if not (math.isnan(a) or math.isnan(b))]
    if len(pairs) < 3:
        return float("nan")
    rx, ry = ranks([a for a, _ in pairs]), ranks([b for _, b in pairs])
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    vy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (vx * vy) if vx and vy else float("nan")


def fmt(x, spec):
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


COLUMNS = [
    ("single / Embree", "single_embree", ".2f", "×"),
    ("batch / Embree", "batch_embree", ".2f", "×"),
    ("any-hit / Embree occluded", "anyhit_embree", ".2f", "×"),
    ("rays / parry3d", "rays_parry", ".2f", "×"),
    ("boxes / parry3d", "boxes_parry", ".2f", "×"),
    ("boxes batch / parry3d", "boxes_batch_parry", ".2f", "×"),
]

FEATURES = [
    ("ray BVH nodes", "ray_bvh_nodes", ".1f"),
    ("ray brushes clipped", "ray_brushes", ".2f"),
    ("ray facets clipped", "ray_patches", ".2f"),
    ("any-hit BVH nodes", "anyhit_bvh_nodes", ".1f"),
    ("any-hit core stops", "anyhit_core_stops", ".2f"),
    ("BSP walk nodes", "walk_nodes", ".0f"),
    ("BSP walk leaves", "walk_leaves", ".1f"),
    ("BSP walk brushes", "walk_brushes", ".1f"),
    ("box BVH nodes", "box_bvh_nodes", ".1f"),
    ("boxes sifted", "box_sifted", ".2f"),
    ("solid brushes", "solid_brushes", "d"),
    ("thin brushes", "small_share", ".2f"),
    ("brushes per leaf", "leaf_brushes_mean", ".1f"),
    ("axial share", "axial_share", ".2f"),
    ("patch facets", "facets", "d"),
    ("volume (M u³)", "volume_mu3", ".0f"),
    ("ray hit share", "hit_share", ".2f"),
    ("mean ray length", "mean_length", ".0f"),
]


def table(results_dir):
    rows = [summarise(r) for r in load_results(results_dir)]
    dev = lambda s: s["name"] + (" (dev)" if s["name"] in DEV_MAPS else "")
    head = ["map"] + [c[0] for c in COLUMNS] + ["bspq single rays/s", "Embree rays/s"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for s in rows:
        cells = [dev(s)] + [fmt(s[k], spec) + unit for _, k, spec, unit in COLUMNS]
        cells += [fmt(s["bspq_rays_qps"] / 1e6, ".2f") + " M", fmt(s["embree_qps"] / 1e6, ".2f") + " M"]
        print("| " + " | ".join(cells) + " |")
    print()
    for label, subset in (("all maps", rows), ("the six development maps", [s for s in rows if s["name"] in DEV_MAPS]),
                          ("the other maps", [s for s in rows if s["name"] not in DEV_MAPS])):
        print(f"Distribution over {label} ({len(subset)}):")
        print()
        print("| | " + " | ".join(c[0] for c in COLUMNS) + " |")
        print("|" + "---|" * (len(COLUMNS) + 1))
        for qname, q in (("median", 0.5), ("10th percentile", 0.1), ("minimum", 0.0), ("maximum", 1.0)):
            vals = []
            for _, k, spec, unit in COLUMNS:
                v = [s[k] for s in subset if not math.isnan(s[k])]
                vals.append(fmt(quantile(v, q), spec) + unit if v else "—")
            print(f"| {qname} | " + " | ".join(vals) + " |")
        lows = []
        for _, k, _, _ in COLUMNS:
            v = [s for s in subset if not math.isnan(s[k])]
            low = min(v, key=lambda s: s[k]) if v else None
            lows.append(low["name"] if low else "—")
        print("| lowest map | " + " | ".join(lows) + " |")
        print()
    print("What each map is and what its queries do (per query means; BSP walk: the rays through the reference walk alone):")
    print()
    head = ["map", "single / Embree"] + [f[0] for f in FEATURES]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for s in rows:
        cells = [dev(s), fmt(s["single_embree"], ".2f") + "×"]
        cells += [fmt(s.get(k, float("nan")), spec) for _, k, spec in FEATURES]
        print("| " + " | ".join(cells) + " |")
    print()
    print("Spearman rank correlation of each map feature with each ratio (all maps):")
    print()
    print("| feature | " + " | ".join(c[0] for c in COLUMNS) + " |")
    print("|" + "---|" * (len(COLUMNS) + 1))
    extra = [("bspq rays/s", "bspq_rays_qps"), ("Embree rays/s", "embree_qps"), ("box brushes", "box_brushes"), ("rays sifted", "sifted"),
             ("bspq boxes/s", "bspq_boxes_qps"), ("parry3d boxes/s", "parry_boxes_qps"),
             ("mean brush sides", "mean_sides"), ("brushes per M u³", "brushes_per_mu3"),
             ("tree nodes", "tree_nodes"), ("triangles", "triangles")]
    for label, k in [(f[0], f[1]) for f in FEATURES] + extra:
        x = [float(s.get(k, float("nan"))) for s in rows]
        cells = [fmt(spearman(x, [s[c[1]] for s in rows]), "+.2f") for c in COLUMNS]
        print(f"| {label} | " + " | ".join(cells) + " |")
    with open(os.path.join(results_dir, "summary.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "list":
        list_maps(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 3 and sys.argv[1] == "features":
        features(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "table":
        table(sys.argv[2])
    else:
        raise SystemExit(__doc__)
