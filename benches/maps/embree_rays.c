/* Embree 3 side by side with `bspq bench`: the same rays on the same
 * triangles (the OBJ that `bspq bench --mesh-obj` writes: the solid brushes'
 * faces and patch facets parry3d is measured on).
 *
 * Optional measuring tool, not part of the crate: benches/maps/run.sh
 * compiles it with gcc when Embree 3 is installed (Debian: libembree-dev).
 *
 *   embree_rays MESH.obj QUERIES.jsonl RUNS MIN_RUN_MS
 *
 * Every query line with a point extent (mins == maxs) is a ray: a segment
 * from "start" to "end" (tnear 0, tfar 1). One thread, RTC_BUILD_QUALITY_HIGH.
 * rtcIntersect1 and rtcOccluded1 runs alternate; each run replays the rays
 * until MIN_RUN_MS of CPU time has passed. Prints one JSON line: the median,
 * 10th percentile and minimum of each engine's rays per CPU-second over the
 * runs, and what the rays meet (hit share, mean segment length).
 */
#include <embree3/rtcore.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct { float org[3], dir[3]; } Seg;

static void die(const char *what) { fprintf(stderr, "embree_rays: %s\n", what); exit(1); }

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Reads the three numbers after `"key":[`; 0 when the key is missing. */
static int vec3_after(const char *line, const char *key, float out[3]) {
    const char *p = strstr(line, key);
    if (!p) return 0;
    p = strchr(p, '[');
    if (!p) return 0;
    char *end;
    for (int i = 0; i < 3; i++) {
        out[i] = strtof(p + 1, &end);
        if (end == p + 1) return 0;
        p = end; /* at ',' or ']' */
    }
    return 1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Value at fraction q of the sorted values (nearest rank). */
static double quantile(double *v, int n, double q) {
    qsort(v, n, sizeof *v, cmp_double);
    return v[(int)lround(q * (n - 1))];
}

static volatile unsigned sink;

int main(int argc, char **argv) {
    if (argc != 5) die("usage: embree_rays MESH.obj QUERIES.jsonl RUNS MIN_RUN_MS");
    int runs = atoi(argv[3]);
    double min_run = atof(argv[4]) / 1000.0;
    if (runs < 1) die("RUNS must be at least 1");

    /* The mesh. */
    FILE *f = fopen(argv[1], "r");
    if (!f) die("cannot open the mesh");
    size_t nv = 0, nt = 0, cv = 1 << 16, ct = 1 << 16;
    float *verts = malloc(cv * 3 * sizeof(float));
    unsigned *tris = malloc(ct * 3 * sizeof(unsigned));
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == 'v' && line[1] == ' ') {
            if (nv == cv) verts = realloc(verts, (cv *= 2) * 3 * sizeof(float));
            if (sscanf(line + 2, "%f %f %f", &verts[3 * nv], &verts[3 * nv + 1], &verts[3 * nv + 2]) != 3) die("bad vertex");
            nv++;
        } else if (line[0] == 'f' && line[1] == ' ') {
            if (nt == ct) tris = realloc(tris, (ct *= 2) * 3 * sizeof(unsigned));
            unsigned a, b, c;
            if (sscanf(line + 2, "%u %u %u", &a, &b, &c) != 3 || !a || !b || !c) die("bad face");
            tris[3 * nt] = a - 1; tris[3 * nt + 1] = b - 1; tris[3 * nt + 2] = c - 1;
            nt++;
        }
    }
    fclose(f);
    for (size_t i = 0; i < 3 * nt; i++) if (tris[i] >= nv) die("face index out of range");

    /* The rays. */
    f = fopen(argv[2], "r");
    if (!f) die("cannot open the queries");
    size_t nr = 0, cr = 1 << 15;
    Seg *rays = malloc(cr * sizeof(Seg));
    static char qline[8192];
    double length_sum = 0;
    while (fgets(qline, sizeof qline, f)) {
        float s[3], e[3], lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
        if (!vec3_after(qline, "\"start\"", s) || !vec3_after(qline, "\"end\"", e)) continue;
        vec3_after(qline, "\"mins\"", lo);
        vec3_after(qline, "\"maxs\"", hi);
        if (lo[0] != hi[0] || lo[1] != hi[1] || lo[2] != hi[2]) continue; /* a box */
        if (nr == cr) rays = realloc(rays, (cr *= 2) * sizeof(Seg));
        Seg *r = &rays[nr++];
        for (int k = 0; k < 3; k++) { r->org[k] = s[k] + lo[k]; r->dir[k] = e[k] - s[k]; }
        length_sum += sqrt((double)r->dir[0] * r->dir[0] + (double)r->dir[1] * r->dir[1] + (double)r->dir[2] * r->dir[2]);
    }
    fclose(f);
    if (!nr) die("no rays in the query file");

    RTCDevice device = rtcNewDevice("threads=1,set_affinity=0");
    if (!device) die("rtcNewDevice failed");
    RTCScene scene = rtcNewScene(device);
    rtcSetSceneBuildQuality(scene, RTC_BUILD_QUALITY_HIGH);
    RTCGeometry geom = rtcNewGeometry(device, RTC_GEOMETRY_TYPE_TRIANGLE);
    rtcSetGeometryBuildQuality(geom, RTC_BUILD_QUALITY_HIGH);
    float *vb = rtcSetNewGeometryBuffer(geom, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT3, 3 * sizeof(float), nv);
    unsigned *ib = rtcSetNewGeometryBuffer(geom, RTC_BUFFER_TYPE_INDEX, 0, RTC_FORMAT_UINT3, 3 * sizeof(unsigned), nt);
    memcpy(vb, verts, nv * 3 * sizeof(float));
    memcpy(ib, tris, nt * 3 * sizeof(unsigned));
    rtcCommitGeometry(geom);
    rtcAttachGeometry(scene, geom);
    rtcReleaseGeometry(geom);
    double build_start = cpu_now();
    rtcCommitScene(scene);
    double build_ms = (cpu_now() - build_start) * 1000.0;

    struct RTCIntersectContext ctx;
    rtcInitIntersectContext(&ctx);
    size_t hits = 0;
    for (size_t i = 0; i < nr; i++) {
        struct RTCRayHit rh;
        memset(&rh, 0, sizeof rh);
        memcpy(&rh.ray.org_x, rays[i].org, sizeof rays[i].org);
        rh.ray.dir_x = rays[i].dir[0]; rh.ray.dir_y = rays[i].dir[1]; rh.ray.dir_z = rays[i].dir[2];
        rh.ray.tnear = 0.0f; rh.ray.tfar = 1.0f; rh.ray.mask = -1;
        rh.hit.geomID = RTC_INVALID_GEOMETRY_ID;
        rtcIntersect1(scene, &ctx, &rh);
        hits += rh.hit.geomID != RTC_INVALID_GEOMETRY_ID;
    }

    double *isect = malloc(runs * sizeof(double)), *occl = malloc(runs * sizeof(double));
    for (int run = 0; run < runs; run++) {
        for (int which = 0; which < 2; which++) {
            size_t done = 0;
            double t0 = cpu_now(), t;
            unsigned acc = 0;
            do {
                for (size_t i = 0; i < nr; i++) {
                    if (which == 0) {
                        struct RTCRayHit rh;
                        rh.ray.org_x = rays[i].org[0]; rh.ray.org_y = rays[i].org[1]; rh.ray.org_z = rays[i].org[2];
                        rh.ray.dir_x = rays[i].dir[0]; rh.ray.dir_y = rays[i].dir[1]; rh.ray.dir_z = rays[i].dir[2];
                        rh.ray.tnear = 0.0f; rh.ray.tfar = 1.0f; rh.ray.time = 0.0f;
                        rh.ray.mask = -1; rh.ray.id = 0; rh.ray.flags = 0;
                        rh.hit.geomID = RTC_INVALID_GEOMETRY_ID;
                        rh.hit.instID[0] = RTC_INVALID_GEOMETRY_ID;
                        rtcIntersect1(scene, &ctx, &rh);
                        acc += rh.hit.primID;
                    } else {
                        struct RTCRay r;
                        r.org_x = rays[i].org[0]; r.org_y = rays[i].org[1]; r.org_z = rays[i].org[2];
                        r.dir_x = rays[i].dir[0]; r.dir_y = rays[i].dir[1]; r.dir_z = rays[i].dir[2];
                        r.tnear = 0.0f; r.tfar = 1.0f; r.time = 0.0f;
                        r.mask = -1; r.id = 0; r.flags = 0;
                        rtcOccluded1(scene, &ctx, &r);
                        acc += r.tfar < 0.0f;
                    }
                }
                done += nr;
                t = cpu_now() - t0;
            } while (t < min_run);
            sink += acc;
            (which == 0 ? isect : occl)[run] = done / t;
        }
    }
    printf("{\"triangles\":%zu,\"vertices\":%zu,\"rays\":%zu,\"hits\":%zu,\"hit_share\":%.4f,"
           "\"mean_length\":%.1f,\"build_ms\":%.1f,\"runs\":%d,",
           nt, nv, nr, hits, (double)hits / nr, length_sum / nr, build_ms, runs);
    double med_i = quantile(isect, runs, 0.5), p10_i = quantile(isect, runs, 0.1), min_i = isect[0];
    double med_o = quantile(occl, runs, 0.5), p10_o = quantile(occl, runs, 0.1), min_o = occl[0];
    printf("\"intersect1_cpu_median\":%.0f,\"intersect1_cpu_p10\":%.0f,\"intersect1_cpu_min\":%.0f,"
           "\"occluded1_cpu_median\":%.0f,\"occluded1_cpu_p10\":%.0f,\"occluded1_cpu_min\":%.0f}\n",
           med_i, p10_i, min_i, med_o, p10_o, min_o);
    rtcReleaseScene(scene);
    rtcReleaseDevice(device);
    return 0;
}
