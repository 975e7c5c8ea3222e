// The debugging page: a world's collision geometry as bspq holds it,
// traces run from the page, and the traces the server answered lately.
// It calls only this server's public routes (same origin).
"use strict";

const $ = (id) => document.getElementById(id);

// Quake 3's content flags (the values are part of bspq's contract).
const CONTENTS = { SOLID: 1, LAVA: 8, SLIME: 16, WATER: 32, PLAYERCLIP: 0x10000, TRIGGER: 0x40000000 };
const SURF_SKY = 0x4;
// What the view tells apart, in the order it decides (a solid brush that
// is also player clip is drawn as solid).
const CATEGORIES = [
  { name: "solid", test: (c) => c & CONTENTS.SOLID, color: [0.62, 0.64, 0.68, 1] },
  { name: "player clip", test: (c) => c & CONTENTS.PLAYERCLIP, color: [0.75, 0.35, 0.95, 0.2] },
  { name: "lava", test: (c) => c & CONTENTS.LAVA, color: [1.0, 0.42, 0.1, 0.55] },
  { name: "slime", test: (c) => c & CONTENTS.SLIME, color: [0.45, 0.95, 0.2, 0.5] },
  { name: "water", test: (c) => c & CONTENTS.WATER, color: [0.2, 0.5, 1.0, 0.4] },
  { name: "trigger", test: (c) => c & CONTENTS.TRIGGER, color: [1.0, 0.9, 0.2, 0.3] },
  { name: "other", test: () => true, color: [0.9, 0.9, 0.9, 0.25] },
];
const OUTCOME_COLORS = { miss: [0.4, 0.85, 0.4, 1], hit: [1, 0.8, 0.25, 1], start_solid: [1, 0.4, 1, 1], all_solid: [1, 0.27, 0.27, 1] };
const SHAPES = {
  player: { mins: [-15, -15, -24], maxs: [15, 15, 32] },
  crouch: { mins: [-15, -15, -24], maxs: [15, 15, 16] },
};
// The trace answer's entity number for the world itself.
const ENTITY_WORLD = 1022;

const state = {
  world: null, // the description (GET /v1/worlds/{name})
  geometry: null, // per model: {model, vertices, triangles, contents, surface_flags, source}
  meshes: [], // per model and category: {model, category, mesh}
  shown: new Set(CATEGORIES.map((c) => c.name)),
  scene: [], // entities as written
  trace: null, // {line, answer, lines mesh}
  highlight: null,
  recent: null,
  recentMesh: null,
  pick: [], // points picked for the next trace
  camera: { target: [0, 0, 0], yaw: -0.8, pitch: 0.75, distance: 2000 },
};

const canvas = $("view");
let renderer;
try {
  renderer = new Renderer(canvas);
} catch (e) {
  $("status").textContent = `cannot draw: ${e.message}`;
}

function status(text) { $("status").textContent = text; }

async function getJson(path) {
  const response = await fetch(path);
  const text = await response.text();
  let body;
  try { body = JSON.parse(text); } catch { throw new Error(`${path}: ${response.status} ${text.slice(0, 200)}`); }
  if (!response.ok) throw Object.assign(new Error(body.error ? body.error.message : text), { status: response.status, body });
  return body;
}

// ---- worlds ----

async function loadWorlds() {
  const { worlds } = await getJson("/v1/worlds");
  const body = $("worlds").tBodies[0];
  body.replaceChildren();
  for (const w of worlds) {
    const row = body.insertRow();
    row.dataset.world = w.name;
    row.insertCell().textContent = w.name;
    row.insertCell().textContent = w.status === "serving" ? w.version : `${w.status}`;
    row.insertCell().textContent = w.loaded_at ? w.loaded_at.replace("T", " ").replace(/\.\d+Z$/, "Z") : w.last_error || "";
    row.title = w.source || "";
    row.onclick = () => selectWorld(w.name);
  }
  const wanted = new URLSearchParams(location.hash.slice(1)).get("world");
  const first = worlds.find((w) => w.name === wanted) || worlds.find((w) => w.status === "serving");
  if (first && !state.world) await selectWorld(first.name);
  if (!worlds.length) $("world-info").textContent = "No world is loaded.";
}

async function selectWorld(name) {
  for (const row of $("worlds").tBodies[0].rows) row.classList.toggle("selected", row.dataset.world === name);
  const started = performance.now();
  status(`loading ${name}…`);
  state.world = await getJson(`/v1/worlds/${encodeURIComponent(name)}`);
  const w = state.world;
  const c = w.counts || {};
  $("world-info").textContent = `${w.source_name || ""} · ${c.brushes} brushes, ${c.patches} patches, ${w.models.length} inline models · hulls: ${w.hulls.join(", ") || "none"}`;
  const hull = $("hull");
  hull.replaceChildren(...w.hulls.map((h) => new Option(h, h)));
  state.trace = null;
  state.highlight = null;
  state.recent = null;
  state.sceneFilled = false;
  frameBounds(w.bounds);
  renderer.release(state.boundsMesh);
  state.boundsMesh = null;
  if (w.bounds) {
    const l = new Lines();
    l.box([0, 0, 0], w.bounds.mins, w.bounds.maxs, [0.35, 0.38, 0.42, 1]);
    state.boundsMesh = renderer.buffer(l.array());
  }
  let geometryNote = "";
  try {
    const g = await getJson(`/v1/worlds/${encodeURIComponent(name)}/geometry`);
    state.geometry = g.models;
    buildMeshes();
  } catch (e) {
    state.geometry = null;
    buildMeshes();
    geometryNote = ` (no geometry: ${e.message})`;
  }
  const ms = Math.round(performance.now() - started);
  window.bspqLoadMs = ms;
  status(`${name} version ${w.version}: loaded in ${ms} ms${geometryNote}`);
  pollRecent();
  redraw();
  // Drawn: the page's load time (since navigation) for the docs' measurements.
  requestAnimationFrame(() => {
    window.bspqReadyMs = Math.round(performance.now());
    document.body.dataset.world = name;
  });
}

function frameBounds(bounds) {
  if (!bounds) return;
  const mid = V3.scale(V3.add(bounds.mins, bounds.maxs), 0.5);
  const size = V3.len(V3.sub(bounds.maxs, bounds.mins));
  state.camera.target = mid;
  state.camera.distance = size * 0.9;
  $("slice-min").value = Math.floor(bounds.mins[2]);
  $("slice-max").value = Math.ceil(bounds.maxs[2]);
}

// ---- geometry ----

function categoryOf(contents) {
  return CATEGORIES.findIndex((c) => c.test(contents));
}

// Per model and category, the triangles as a lit mesh (a normal per face).
function buildMeshes() {
  for (const m of state.meshes) renderer.release(m.mesh);
  state.meshes = [];
  if (!state.geometry) return;
  const showSky = $("show-sky").checked;
  for (const model of state.geometry) {
    const parts = CATEGORIES.map(() => []);
    const v = model.vertices, t = model.triangles;
    for (let i = 0; i < model.contents.length; i++) {
      if (!showSky && model.surface_flags[i] & SURF_SKY) continue;
      parts[categoryOf(model.contents[i])].push(i);
    }
    parts.forEach((tris, k) => {
      if (!tris.length) return;
      const data = new Float32Array(tris.length * 3 * STRIDE);
      const color = CATEGORIES[k].color;
      let o = 0;
      for (const i of tris) {
        const a = t[3 * i] * 3, b = t[3 * i + 1] * 3, c = t[3 * i + 2] * 3;
        const ux = v[b] - v[a], uy = v[b + 1] - v[a + 1], uz = v[b + 2] - v[a + 2];
        const wx = v[c] - v[a], wy = v[c + 1] - v[a + 1], wz = v[c + 2] - v[a + 2];
        let nx = uy * wz - uz * wy, ny = uz * wx - ux * wz, nz = ux * wy - uy * wx;
        const l = Math.hypot(nx, ny, nz) || 1;
        nx /= l; ny /= l; nz /= l;
        for (const q of [a, b, c]) {
          data[o] = v[q]; data[o + 1] = v[q + 1]; data[o + 2] = v[q + 2];
          data[o + 3] = nx; data[o + 4] = ny; data[o + 5] = nz;
          data[o + 6] = color[0]; data[o + 7] = color[1]; data[o + 8] = color[2]; data[o + 9] = color[3];
          o += STRIDE;
        }
      }
      state.meshes.push({ model: model.model, category: k, mesh: renderer.buffer(data) });
    });
  }
}

// The triangles of brush `source` in `model`, as a mesh to draw over the rest.
function brushMesh(model, source) {
  const g = state.geometry && state.geometry.find((m) => m.model === model);
  if (!g) return null;
  const data = [];
  for (let i = 0; i < g.source.length; i++) {
    if (g.source[i] !== source) continue;
    for (let j = 0; j < 3; j++) {
      const q = g.triangles[3 * i + j] * 3;
      data.push(g.vertices[q], g.vertices[q + 1], g.vertices[q + 2], 0, 0, 1, 1, 0.2, 0.2, 0.55);
    }
  }
  return renderer.buffer(new Float32Array(data));
}

// The brush a trace stopped on: of the triangles lying in the answer's
// plane (normal and dist), the one nearest the contact point. bspq answers
// with the plane, not the brush, so this is found from the geometry.
function findHitBrush(line, answer) {
  if (!state.geometry || answer.fraction >= 1 || answer.startsolid) return null;
  if (answer.entity !== undefined && answer.entity !== ENTITY_WORLD) return null;
  const g = state.geometry.find((m) => m.model === 0);
  if (!g) return null;
  const n = answer.normal, v = g.vertices, t = g.triangles;
  // The contact point: the stop point moved to the shape's side that touched.
  let contact = answer.endpos;
  if (line.mins) contact = V3.add(contact, [0, 1, 2].map((a) => (n[a] > 0 ? line.mins[a] : line.maxs[a])));
  else if (line.shape && line.shape.sphere) contact = V3.sub(contact, V3.scale(n, line.shape.sphere.radius));
  let best = null, bestDistance = Infinity;
  for (let i = 0; i < g.source.length; i++) {
    const p = [0, 1, 2].map((j) => { const q = t[3 * i + j] * 3; return [v[q], v[q + 1], v[q + 2]]; });
    const fn = V3.norm(V3.cross(V3.sub(p[1], p[0]), V3.sub(p[2], p[0])));
    if (V3.dot(fn, n) < 0.999 || Math.abs(V3.dot(p[0], n) - answer.dist) > 0.5) continue;
    const d = distanceToTriangle(contact, p);
    if (d < bestDistance) { bestDistance = d; best = i; }
  }
  return best === null ? null : { model: 0, source: g.source[best], distance: bestDistance };
}

function distanceToTriangle(x, [a, b, c]) {
  // Within the triangle's prism: the distance to its plane; else to its nearest edge.
  const n = V3.norm(V3.cross(V3.sub(b, a), V3.sub(c, a)));
  const inside = [[a, b], [b, c], [c, a]].every(([p, q]) => V3.dot(V3.cross(V3.sub(q, p), V3.sub(x, p)), n) >= -1e-3);
  if (inside) return Math.abs(V3.dot(V3.sub(x, a), n));
  let best = Infinity;
  for (const [p, q] of [[a, b], [b, c], [c, a]]) {
    const d = V3.sub(q, p), s = Math.max(0, Math.min(1, V3.dot(V3.sub(x, p), d) / (V3.dot(d, d) || 1)));
    best = Math.min(best, V3.len(V3.sub(x, V3.add(p, V3.scale(d, s)))));
  }
  return best;
}

// ---- camera and drawing ----

function matrices() {
  const cam = state.camera, w = canvas.clientWidth || 1, h = canvas.clientHeight || 1;
  if ($("top-down").checked) {
    const half = cam.distance * 0.5, eye = [cam.target[0], cam.target[1], 65536];
    const view = M4.lookAt(eye, [eye[0], eye[1], 0], [0, 1, 0]);
    return M4.multiply(M4.ortho(-half * w / h, half * w / h, -half, half, 1, 200000), view);
  }
  const eye = V3.add(cam.target, V3.scale([Math.cos(cam.pitch) * Math.cos(cam.yaw), Math.cos(cam.pitch) * Math.sin(cam.yaw), Math.sin(cam.pitch)], cam.distance));
  const view = M4.lookAt(eye, cam.target, [0, 0, 1]);
  return M4.multiply(M4.perspective(Math.PI / 3, w / h, Math.max(1, cam.distance / 1000), cam.distance * 20 + 20000), view);
}

let drawQueued = false;
function redraw() {
  if (drawQueued || !renderer) return;
  drawQueued = true;
  requestAnimationFrame(() => { drawQueued = false; draw(); });
}

function draw() {
  const dpr = window.devicePixelRatio || 1;
  const w = Math.round(canvas.clientWidth * dpr), h = Math.round(canvas.clientHeight * dpr);
  if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
  const slice = [Number($("slice-min").value || -1e9), Number($("slice-max").value || 1e9)];
  renderer.begin(matrices(), slice);
  const showRest = $("show-rest").checked;
  // Opaque first, then translucent categories over them.
  for (const pass of [false, true]) {
    for (const m of state.meshes) {
      const c = CATEGORIES[m.category];
      if (!state.shown.has(c.name) || (c.color[3] < 1) !== pass) continue;
      if (m.model === 0) renderer.draw(m.mesh, { translucent: pass });
      else if (showRest) renderer.draw(m.mesh, { translucent: true, tint: [0.7, 0.85, 1, 0.35] });
    }
    // The scene's entities: their models where the scene puts them.
    for (const e of state.scene) {
      if (!e.model) continue;
      const k = Number(e.model.slice(1));
      const transform = M4.entity(e.angles || [0, 0, 0], e.origin || [0, 0, 0]);
      for (const m of state.meshes)
        if (m.model === k && (CATEGORIES[m.category].color[3] < 1) === pass)
          renderer.draw(m.mesh, { model: transform, tint: [0.6, 1, 0.8, 1], translucent: pass });
    }
  }
  if (state.boundsMesh) renderer.draw(state.boundsMesh, { lines: true });
  if (state.highlight) renderer.draw(state.highlight, { translucent: true, xray: true });
  // Traces and the scene's boxes show through walls, faint.
  if (state.sceneLines) renderer.draw(state.sceneLines, { lines: true, xray: true });
  if ($("recent-on").checked && state.recentMesh) renderer.draw(state.recentMesh, { lines: true, xray: true });
  if (state.trace) renderer.draw(state.trace.mesh, { lines: true, xray: true });
  if (state.pickMesh) renderer.draw(state.pickMesh, { lines: true, xray: true });
}

// Orbit (drag), pan (right or shift drag), zoom (wheel), pick (click).
let drag = null;
canvas.addEventListener("contextmenu", (e) => e.preventDefault());
canvas.addEventListener("mousedown", (e) => { drag = { x: e.clientX, y: e.clientY, moved: 0, pan: e.button === 2 || e.shiftKey }; });
window.addEventListener("mouseup", (e) => {
  if (drag && drag.moved < 4 && e.target === canvas && e.button === 0) pickAt(e);
  drag = null;
});
window.addEventListener("mousemove", (e) => {
  if (!drag) return;
  const dx = e.clientX - drag.x, dy = e.clientY - drag.y, cam = state.camera;
  drag.moved += Math.abs(dx) + Math.abs(dy);
  drag.x = e.clientX;
  drag.y = e.clientY;
  if (drag.pan || $("top-down").checked) {
    const s = cam.distance / (canvas.clientHeight || 1) * ($("top-down").checked ? 1 : 1.15);
    const right = $("top-down").checked ? [1, 0, 0] : [-Math.sin(cam.yaw), Math.cos(cam.yaw), 0];
    const up = $("top-down").checked ? [0, 1, 0] : V3.cross(V3.norm([Math.cos(cam.yaw), Math.sin(cam.yaw), 0]), right).map((x) => -x);
    cam.target = V3.add(cam.target, V3.add(V3.scale(right, -dx * s), V3.scale(up, dy * s)));
  } else {
    cam.yaw -= dx * 0.008;
    cam.pitch = Math.max(-1.55, Math.min(1.55, cam.pitch + dy * 0.008));
  }
  redraw();
});
canvas.addEventListener("wheel", (e) => {
  e.preventDefault();
  state.camera.distance = Math.max(16, state.camera.distance * Math.exp(e.deltaY * 0.001));
  redraw();
}, { passive: false });
window.addEventListener("resize", redraw);

// The face under the cursor among those drawn (the world's, within the
// slice); the picked point is moved off it along its normal by the shape's
// extent, so the shape starts clear of it.
function pickAt(e) {
  if (!$("pick-mode").checked || !state.geometry) return;
  const r = canvas.getBoundingClientRect();
  const x = ((e.clientX - r.left) / r.width) * 2 - 1, y = 1 - ((e.clientY - r.top) / r.height) * 2;
  const inv = M4.invert(matrices());
  const near = M4.apply(inv, [x, y, -1, 1]), far = M4.apply(inv, [x, y, 1, 1]);
  const o = V3.scale(near, 1 / near[3]), d = V3.norm(V3.sub(V3.scale(far, 1 / far[3]), o));
  const hit = raycast(o, d);
  if (!hit) return;
  const line = queryLine(true);
  let offset = 1;
  if (line.mins) offset += Math.max(...[0, 1, 2].map((a) => Math.abs(hit.normal[a]) * Math.max(-line.mins[a], line.maxs[a]))) * 1.8;
  if (line.shape) offset += line.shape.sphere.radius;
  const p = V3.add(hit.point, V3.scale(hit.normal, offset)).map((c) => Math.round(c * 8) / 8);
  state.pick.push(p);
  if (state.pick.length === 1) {
    $("start").value = p.join(",");
    const l = new Lines();
    l.cross(p, 12, [1, 1, 1, 1]);
    state.pickMesh = renderer.buffer(l.array());
    redraw();
  } else {
    $("end").value = p.join(",");
    state.pick = [];
    state.pickMesh = null;
    runTrace();
  }
}

function raycast(o, d) {
  const slice = [Number($("slice-min").value || -1e9), Number($("slice-max").value || 1e9)];
  const showSky = $("show-sky").checked;
  let best = null;
  for (const g of state.geometry) {
    if (g.model !== 0) continue;
    const v = g.vertices, t = g.triangles;
    for (let i = 0; i < g.contents.length; i++) {
      if (!state.shown.has(CATEGORIES[categoryOf(g.contents[i])].name)) continue;
      if (!showSky && g.surface_flags[i] & SURF_SKY) continue;
      const p = [0, 1, 2].map((j) => { const q = t[3 * i + j] * 3; return [v[q], v[q + 1], v[q + 2]]; });
      const e1 = V3.sub(p[1], p[0]), e2 = V3.sub(p[2], p[0]), h = V3.cross(d, e2), a = V3.dot(e1, h);
      if (Math.abs(a) < 1e-9) continue;
      const s = V3.sub(o, p[0]), u = V3.dot(s, h) / a;
      if (u < 0 || u > 1) continue;
      const q = V3.cross(s, e1), w = V3.dot(d, q) / a;
      if (w < 0 || u + w > 1) continue;
      const dist = V3.dot(e2, q) / a;
      const point = V3.add(o, V3.scale(d, dist));
      if (dist <= 0 || (best && dist >= best.dist) || point[2] < slice[0] || point[2] > slice[1]) continue;
      let normal = V3.norm(V3.cross(e1, e2));
      if (V3.dot(normal, d) > 0) normal = V3.scale(normal, -1);
      best = { dist, point, normal };
    }
  }
  return best;
}

// ---- traces ----

function vec3(text, what) {
  const parts = text.split(",").map((s) => Number(s.trim()));
  if (parts.length !== 3 || parts.some((x) => !Number.isFinite(x) || text.trim() === "")) throw new Error(`${what} must be three numbers x,y,z`);
  return parts;
}

function parseMask(text) {
  const t = text.trim();
  const m = /^0x[0-9a-f]+$/i.test(t) ? parseInt(t, 16) : /^\d+$/.test(t) ? Number(t) : NaN;
  if (!Number.isInteger(m) || m < 0 || m > 0xffffffff) throw new Error("mask must be an integer (decimal or 0x…)");
  return m;
}

// The query line the form describes (`shapeOnly`: without start and end).
function queryLine(shapeOnly = false) {
  const line = shapeOnly ? {} : { start: vec3($("start").value, "start"), end: vec3($("end").value, "end") };
  const shape = $("shape").value;
  if (SHAPES[shape]) Object.assign(line, { mins: SHAPES[shape].mins, maxs: SHAPES[shape].maxs });
  if (shape === "sphere") line.shape = { sphere: { radius: Number($("radius").value) } };
  if (shape === "hull") line.hull = $("hull").value;
  if (!shapeOnly) line.mask = parseMask($("mask").value);
  return line;
}

function sceneEntities() {
  const text = $("scene").value.trim();
  if (!text) return [];
  const entities = JSON.parse(text);
  if (!Array.isArray(entities)) throw new Error("the scene is a JSON list of entities");
  return entities;
}

function shellQuote(s) { return `'${s.replace(/'/g, `'\\''`)}'`; }

async function runTrace() {
  $("trace-error").textContent = "";
  if (!state.world) return;
  let line, entities;
  try {
    line = queryLine();
    entities = sceneEntities();
  } catch (e) {
    $("trace-error").textContent = e.message;
    return;
  }
  setScene(entities);
  const body = JSON.stringify(entities.length ? { entities, queries: [line] } : { queries: [line] });
  const path = `/v1/worlds/${encodeURIComponent(state.world.name)}/trace`;
  $("curl").textContent = `curl -s -X POST ${location.origin}${path} -d ${shellQuote(body)}`;
  const response = await fetch(path, { method: "POST", body, headers: { "Content-Type": "application/json" } });
  const text = await response.text();
  $("answer").textContent = text;
  let parsed;
  try { parsed = JSON.parse(text); } catch { parsed = null; }
  if (!response.ok || !parsed || !parsed.results) {
    $("trace-error").textContent = parsed && parsed.error ? parsed.error.message : `HTTP ${response.status}`;
    return;
  }
  showTrace(line, parsed.results[0]);
  pollRecent();
}

function showTrace(line, answer) {
  const l = new Lines();
  const outcome = answer.allsolid ? "all_solid" : answer.startsolid ? "start_solid" : answer.fraction < 1 ? "hit" : "miss";
  const color = OUTCOME_COLORS[outcome];
  const stop = answer.endpos;
  l.segment(line.start, line.end, [0.5, 0.5, 0.5, 1]);
  l.segment(line.start, stop, color);
  const drawShape = (at, c) => {
    if (line.mins) l.box(at, line.mins, line.maxs, c);
    else if (line.shape) l.sphere(at, line.shape.sphere.radius, c);
    else l.cross(at, 6, c);
  };
  drawShape(line.start, [1, 1, 1, 1]);
  drawShape(stop, color);
  if (answer.fraction < 1 && !answer.allsolid) l.segment(stop, V3.add(stop, V3.scale(answer.normal, 48)), [0.3, 0.9, 1, 1]);
  renderer.release(state.trace && state.trace.mesh);
  state.trace = { line, answer, mesh: renderer.buffer(l.array()) };
  renderer.release(state.highlight);
  state.highlight = null;
  const brush = findHitBrush(line, answer);
  if (brush) {
    state.highlight = brushMesh(brush.model, brush.source);
    $("hit-brush").textContent = `${outcome}: stopped on brush ${brush.source} (the face in the answer's plane nearest the contact)`;
  } else {
    $("hit-brush").textContent = `${outcome}${answer.entity !== undefined && answer.entity !== ENTITY_WORLD && answer.fraction < 1 ? `: entity ${answer.entity}` : ""}`;
  }
  document.body.dataset.traced = String(Number(document.body.dataset.traced || 0) + 1);
  redraw();
}

// The scene's boxes as lines (its models are drawn with the geometry).
function setScene(entities) {
  state.scene = entities;
  const l = new Lines();
  for (const e of entities) if (e.box) l.box(e.origin || [0, 0, 0], e.box.mins, e.box.maxs, [0.5, 1, 0.7, 1]);
  renderer.release(state.sceneLines);
  state.sceneLines = renderer.buffer(l.array());
  redraw();
}

// ---- recent traces ----

let recentTimer = null;
async function pollRecent() {
  clearTimeout(recentTimer);
  if (!state.world) return;
  const params = new URLSearchParams();
  if ($("recent-kind").value) params.set("kind", $("recent-kind").value);
  if ($("recent-mask").value) params.set("mask", $("recent-mask").value);
  try {
    const recent = await getJson(`/v1/worlds/${encodeURIComponent(state.world.name)}/recent?${params}`);
    showRecent(recent);
  } catch (e) {
    $("recent-status").textContent = `recent traces: ${e.message}`;
  }
  if ($("recent-on").checked) recentTimer = setTimeout(pollRecent, 1000);
}

function showRecent(recent) {
  state.recent = recent;
  if (!recent.capacity) {
    $("recent-status").textContent = "Recording is off: start the server with --record-queries N to see the traces it answers.";
    return;
  }
  // The scene a client traced with lately, once per world, when the form has none.
  if (recent.scene && !state.sceneFilled && !$("scene").value.trim()) {
    state.sceneFilled = true;
    $("scene").value = JSON.stringify(recent.scene);
    setScene(recent.scene);
  }
  $("recent-status").textContent = `${recent.traces.length} shown of ${recent.recorded} recorded (the last ${recent.capacity} kept)`;
  const masks = $("recent-mask");
  for (const t of recent.traces) {
    if (![...masks.options].some((o) => o.value === String(t.mask))) masks.add(new Option(`0x${t.mask.toString(16)}`, String(t.mask)));
  }
  const l = new Lines();
  for (const t of recent.traces) {
    const a = t.answer;
    l.segment(t.start, a.endpos || t.end, OUTCOME_COLORS[t.outcome]);
  }
  renderer.release(state.recentMesh);
  state.recentMesh = renderer.buffer(l.array());
  const list = $("recent-list");
  list.replaceChildren();
  for (const t of recent.traces.slice(-12).reverse()) {
    const li = document.createElement("li");
    li.className = t.outcome;
    const a = t.answer;
    li.textContent = `#${t.seq} ${t.kind}${t.any ? " any" : ""} mask 0x${t.mask.toString(16)} ${t.outcome}${a.fraction !== undefined ? ` ${a.fraction}` : ""}`;
    li.title = JSON.stringify(t);
    li.onclick = () => replay(t);
    list.appendChild(li);
  }
  document.body.dataset.recent = String(recent.recorded);
  redraw();
}

// A recorded trace back in the form.
function replay(t) {
  $("start").value = t.start.join(",");
  $("end").value = t.end.join(",");
  $("mask").value = String(t.mask);
  $("shape").value = t.hull ? "hull" : t.shape && t.shape.sphere ? "sphere" : t.mins ? (t.maxs[2] === 16 ? "crouch" : "player") : "ray";
  if (t.shape && t.shape.sphere) $("radius").value = t.shape.sphere.radius;
  if (t.hull) $("hull").value = t.hull;
  shapeFields();
}

// ---- controls ----

function shapeFields() {
  $("radius-label").style.display = $("shape").value === "sphere" ? "" : "none";
  $("hull-label").style.display = $("shape").value === "hull" ? "" : "none";
}

function legend() {
  const box = $("legend");
  for (const c of CATEGORIES) {
    const label = document.createElement("label");
    const check = document.createElement("input");
    check.type = "checkbox";
    check.checked = true;
    check.onchange = () => { if (check.checked) state.shown.add(c.name); else state.shown.delete(c.name); redraw(); };
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = `rgb(${c.color.slice(0, 3).map((x) => Math.round(x * 255)).join(",")})`;
    label.append(check, swatch, c.name);
    box.appendChild(label);
  }
}

$("trace-form").addEventListener("submit", (e) => { e.preventDefault(); runTrace(); });
$("shape").addEventListener("change", shapeFields);
$("mask-pick").addEventListener("change", () => { if ($("mask-pick").value) $("mask").value = $("mask-pick").value; });
for (const id of ["top-down", "slice-min", "slice-max", "show-rest"]) $(id).addEventListener("input", redraw);
$("show-sky").addEventListener("change", () => { buildMeshes(); redraw(); });
for (const id of ["recent-kind", "recent-mask"]) $(id).addEventListener("change", pollRecent);
$("recent-on").addEventListener("change", () => { pollRecent(); redraw(); });
$("use-recorded-scene").addEventListener("click", () => {
  if (state.recent && state.recent.scene) { $("scene").value = JSON.stringify(state.recent.scene); setScene(state.recent.scene); }
});
$("scene").addEventListener("change", () => { try { setScene(sceneEntities()); } catch (e) { $("trace-error").textContent = e.message; } });

legend();
shapeFields();
loadWorlds().catch((e) => status(`cannot list worlds: ${e.message}`));
