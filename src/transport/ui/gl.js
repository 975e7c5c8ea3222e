// Matrices (column-major, as WebGL takes them) and a small WebGL renderer:
// lit triangles and coloured lines, both clipped to a height slice.
"use strict";

const M4 = {
  multiply(a, b) {
    const o = new Float32Array(16);
    for (let c = 0; c < 4; c++)
      for (let r = 0; r < 4; r++) {
        let s = 0;
        for (let k = 0; k < 4; k++) s += a[k * 4 + r] * b[c * 4 + k];
        o[c * 4 + r] = s;
      }
    return o;
  },
  perspective(fovy, aspect, near, far) {
    const f = 1 / Math.tan(fovy / 2), nf = 1 / (near - far);
    return new Float32Array([f / aspect, 0, 0, 0, 0, f, 0, 0, 0, 0, (far + near) * nf, -1, 0, 0, 2 * far * near * nf, 0]);
  },
  ortho(l, r, b, t, n, f) {
    return new Float32Array([2 / (r - l), 0, 0, 0, 0, 2 / (t - b), 0, 0, 0, 0, -2 / (f - n), 0,
      -(r + l) / (r - l), -(t + b) / (t - b), -(f + n) / (f - n), 1]);
  },
  lookAt(eye, target, up) {
    const z = V3.norm(V3.sub(eye, target)), x = V3.norm(V3.cross(up, z)), y = V3.cross(z, x);
    return new Float32Array([x[0], y[0], z[0], 0, x[1], y[1], z[1], 0, x[2], y[2], z[2], 0,
      -V3.dot(x, eye), -V3.dot(y, eye), -V3.dot(z, eye), 1]);
  },
  identity() { return new Float32Array([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]); },
  // Rotation by Quake 3's angles (pitch, yaw, roll in degrees) then a move
  // to `origin`: a model point p goes to p.x*forward + p.y*left + p.z*up + origin.
  entity(angles, origin) {
    const rad = (d) => d * Math.PI / 180;
    const [sp, cp] = [Math.sin(rad(angles[0])), Math.cos(rad(angles[0]))];
    const [sy, cy] = [Math.sin(rad(angles[1])), Math.cos(rad(angles[1]))];
    const [sr, cr] = [Math.sin(rad(angles[2])), Math.cos(rad(angles[2]))];
    const f = [cp * cy, cp * sy, -sp];
    const left = [sr * sp * cy - cr * sy, sr * sp * sy + cr * cy, sr * cp];
    const u = [cr * sp * cy + sr * sy, cr * sp * sy - sr * cy, cr * cp];
    return new Float32Array([...f, 0, ...left, 0, ...u, 0, origin[0], origin[1], origin[2], 1]);
  },
  invert(m) {
    const inv = new Float32Array(16);
    inv[0] = m[5]*m[10]*m[15]-m[5]*m[11]*m[14]-m[9]*m[6]*m[15]+m[9]*m[7]*m[14]+m[13]*m[6]*m[11]-m[13]*m[7]*m[10];
    inv[4] = -m[4]*m[10]*m[15]+m[4]*m[11]*m[14]+m[8]*m[6]*m[15]-m[8]*m[7]*m[14]-m[12]*m[6]*m[11]+m[12]*m[7]*m[10];
    inv[8] = m[4]*m[9]*m[15]-m[4]*m[11]*m[13]-m[8]*m[5]*m[15]+m[8]*m[7]*m[13]+m[12]*m[5]*m[11]-m[12]*m[7]*m[9];
    inv[12] = -m[4]*m[9]*m[14]+m[4]*m[10]*m[13]+m[8]*m[5]*m[14]-m[8]*m[6]*m[13]-m[12]*m[5]*m[10]+m[12]*m[6]*m[9];
    inv[1] = -m[1]*m[10]*m[15]+m[1]*m[11]*m[14]+m[9]*m[2]*m[15]-m[9]*m[3]*m[14]-m[13]*m[2]*m[11]+m[13]*m[3]*m[10];
    inv[5] = m[0]*m[10]*m[15]-m[0]*m[11]*m[14]-m[8]*m[2]*m[15]+m[8]*m[3]*m[14]+m[12]*m[2]*m[11]-m[12]*m[3]*m[10];
    inv[9] = -m[0]*m[9]*m[15]+m[0]*m[11]*m[13]+m[8]*m[1]*m[15]-m[8]*m[3]*m[13]-m[12]*m[1]*m[11]+m[12]*m[3]*m[9];
    inv[13] = m[0]*m[9]*m[14]-m[0]*m[10]*m[13]-m[8]*m[1]*m[14]+m[8]*m[2]*m[13]+m[12]*m[1]*m[10]-m[12]*m[2]*m[9];
    inv[2] = m[1]*m[6]*m[15]-m[1]*m[7]*m[14]-m[5]*m[2]*m[15]+m[5]*m[3]*m[14]+m[13]*m[2]*m[7]-m[13]*m[3]*m[6];
    inv[6] = -m[0]*m[6]*m[15]+m[0]*m[7]*m[14]+m[4]*m[2]*m[15]-m[4]*m[3]*m[14]-m[12]*m[2]*m[7]+m[12]*m[3]*m[6];
    inv[10] = m[0]*m[5]*m[15]-m[0]*m[7]*m[13]-m[4]*m[1]*m[15]+m[4]*m[3]*m[13]+m[12]*m[1]*m[7]-m[12]*m[3]*m[5];
    inv[14] = -m[0]*m[5]*m[14]+m[0]*m[6]*m[13]+m[4]*m[1]*m[14]-m[4]*m[2]*m[13]-m[12]*m[1]*m[6]+m[12]*m[2]*m[5];
    inv[3] = -m[1]*m[6]*m[11]+m[1]*m[7]*m[10]+m[5]*m[2]*m[11]-m[5]*m[3]*m[10]-m[9]*m[2]*m[7]+m[9]*m[3]*m[6];
    inv[7] = m[0]*m[6]*m[11]-m[0]*m[7]*m[10]-m[4]*m[2]*m[11]+m[4]*m[3]*m[10]+m[8]*m[2]*m[7]-m[8]*m[3]*m[6];
    inv[11] = -m[0]*m[5]*m[11]+m[0]*m[7]*m[9]+m[4]*m[1]*m[11]-m[4]*m[3]*m[9]-m[8]*m[1]*m[7]+m[8]*m[3]*m[5];
    inv[15] = m[0]*m[5]*m[10]-m[0]*m[6]*m[9]-m[4]*m[1]*m[10]+m[4]*m[2]*m[9]+m[8]*m[1]*m[6]-m[8]*m[2]*m[5];
    const det = m[0] * inv[0] + m[1] * inv[4] + m[2] * inv[8] + m[3] * inv[12];
    for (let i = 0; i < 16; i++) inv[i] /= det;
    return inv;
  },
  apply(m, p) {
    const x = p[0], y = p[1], z = p[2], w = p.length > 3 ? p[3] : 1;
    const o = [0, 0, 0, 0];
    for (let r = 0; r < 4; r++) o[r] = m[r] * x + m[4 + r] * y + m[8 + r] * z + m[12 + r] * w;
    return o;
  },
};

const V3 = {
  add: (a, b) => [a[0] + b[0], a[1] + b[1], a[2] + b[2]],
  sub: (a, b) => [a[0] - b[0], a[1] - b[1], a[2] - b[2]],
  scale: (a, s) => [a[0] * s, a[1] * s, a[2] * s],
  dot: (a, b) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2],
  cross: (a, b) => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]],
  len: (a) => Math.hypot(a[0], a[1], a[2]),
  norm(a) { const l = V3.len(a) || 1; return [a[0] / l, a[1] / l, a[2] / l]; },
};

const VERTEX_SHADER = `
attribute vec3 position;
attribute vec3 normal;
attribute vec4 color;
uniform mat4 viewProjection;
uniform mat4 model;
uniform float lit;
varying vec4 vColor;
varying float vZ;
varying float vShade;
void main() {
  vec4 world = model * vec4(position, 1.0);
  vZ = world.z;
  vec3 n = normalize(mat3(model) * normal + vec3(1e-6));
  vShade = mix(1.0, 0.45 + 0.55 * abs(dot(n, normalize(vec3(0.35, 0.55, 0.76)))), lit);
  vColor = color;
  gl_Position = viewProjection * world;
}`;

const FRAGMENT_SHADER = `
precision mediump float;
uniform vec2 slice;
uniform vec4 tint;
varying vec4 vColor;
varying float vZ;
varying float vShade;
void main() {
  if (vZ < slice.x || vZ > slice.y) discard;
  vec4 c = vColor * tint;
  gl_FragColor = vec4(c.rgb * vShade, c.a);
}`;

// Vertex layout: position (3), normal (3), colour (4) floats.
const STRIDE = 10;

class Renderer {
  constructor(canvas) {
    const gl = canvas.getContext("webgl", { antialias: true, preserveDrawingBuffer: true });
    if (!gl) throw new Error("this browser has no WebGL");
    this.gl = gl;
    const compile = (type, source) => {
      const s = gl.createShader(type);
      gl.shaderSource(s, source);
      gl.compileShader(s);
      if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
      return s;
    };
    const p = gl.createProgram();
    gl.attachShader(p, compile(gl.VERTEX_SHADER, VERTEX_SHADER));
    gl.attachShader(p, compile(gl.FRAGMENT_SHADER, FRAGMENT_SHADER));
    gl.linkProgram(p);
    if (!gl.getProgramParameter(p, gl.LINK_STATUS)) throw new Error(gl.getProgramInfoLog(p));
    this.program = p;
    this.loc = {};
    for (const a of ["position", "normal", "color"]) this.loc[a] = gl.getAttribLocation(p, a);
    for (const u of ["viewProjection", "model", "lit", "slice", "tint"]) this.loc[u] = gl.getUniformLocation(p, u);
  }

  // A vertex buffer from a Float32Array in the layout above.
  buffer(data) {
    const gl = this.gl, b = gl.createBuffer();
    gl.bindBuffer(gl.ARRAY_BUFFER, b);
    gl.bufferData(gl.ARRAY_BUFFER, data, gl.STATIC_DRAW);
    return { buffer: b, count: data.length / STRIDE };
  }

  release(mesh) { if (mesh) this.gl.deleteBuffer(mesh.buffer); }

  begin(viewProjection, slice) {
    const gl = this.gl;
    gl.viewport(0, 0, gl.drawingBufferWidth, gl.drawingBufferHeight);
    gl.clearColor(0.08, 0.09, 0.1, 1);
    gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
    gl.enable(gl.DEPTH_TEST);
    gl.depthFunc(gl.LEQUAL);
    gl.enable(gl.BLEND);
    gl.blendFunc(gl.SRC_ALPHA, gl.ONE_MINUS_SRC_ALPHA);
    gl.useProgram(this.program);
    gl.uniformMatrix4fv(this.loc.viewProjection, false, viewProjection);
    gl.uniform2f(this.loc.slice, slice[0], slice[1]);
  }

  // Draws `mesh` as TRIANGLES (lit) or LINES; `translucent` draws without
  // writing depth, so what is behind still shows.
  // `xray` draws lines a second time, faint, through whatever hides them.
  draw(mesh, { lines = false, model = M4.identity(), tint = [1, 1, 1, 1], translucent = false, xray = false } = {}) {
    if (!mesh || mesh.count === 0) return;
    const gl = this.gl, loc = this.loc;
    gl.bindBuffer(gl.ARRAY_BUFFER, mesh.buffer);
    const bytes = STRIDE * 4;
    gl.enableVertexAttribArray(loc.position);
    gl.vertexAttribPointer(loc.position, 3, gl.FLOAT, false, bytes, 0);
    gl.enableVertexAttribArray(loc.normal);
    gl.vertexAttribPointer(loc.normal, 3, gl.FLOAT, false, bytes, 12);
    gl.enableVertexAttribArray(loc.color);
    gl.vertexAttribPointer(loc.color, 4, gl.FLOAT, false, bytes, 24);
    gl.uniformMatrix4fv(loc.model, false, model);
    gl.uniform1f(loc.lit, lines ? 0 : 1);
    gl.uniform4fv(loc.tint, tint);
    gl.depthMask(!translucent);
    // Translucent faces lying on solid ones (clip over a wall) drawn just
    // in front of them rather than speckled through them.
    if (translucent) {
      gl.enable(gl.POLYGON_OFFSET_FILL);
      gl.polygonOffset(-1, -2);
    }
    gl.drawArrays(lines ? gl.LINES : gl.TRIANGLES, 0, mesh.count);
    gl.disable(gl.POLYGON_OFFSET_FILL);
    if (xray) {
      gl.disable(gl.DEPTH_TEST);
      gl.uniform4fv(loc.tint, [tint[0], tint[1], tint[2], tint[3] * 0.45]);
      gl.drawArrays(lines ? gl.LINES : gl.TRIANGLES, 0, mesh.count);
      gl.enable(gl.DEPTH_TEST);
    }
    gl.depthMask(true);
  }
}

// Collects line segments with colours into the vertex layout.
class Lines {
  constructor() { this.data = []; }
  segment(a, b, color) {
    this.data.push(a[0], a[1], a[2], 0, 0, 0, ...color, b[0], b[1], b[2], 0, 0, 0, ...color);
  }
  box(center, mins, maxs, color) {
    const c = (i) => [center[0] + (i & 1 ? maxs[0] : mins[0]), center[1] + (i & 2 ? maxs[1] : mins[1]), center[2] + (i & 4 ? maxs[2] : mins[2])];
    for (const [i, j] of [[0, 1], [2, 3], [4, 5], [6, 7], [0, 2], [1, 3], [4, 6], [5, 7], [0, 4], [1, 5], [2, 6], [3, 7]])
      this.segment(c(i), c(j), color);
  }
  sphere(center, r, color) {
    const n = 24;
    for (let axis = 0; axis < 3; axis++)
      for (let i = 0; i < n; i++) {
        const p = (k) => {
          const t = (2 * Math.PI * k) / n, u = [Math.cos(t) * r, Math.sin(t) * r];
          const v = axis === 0 ? [0, u[0], u[1]] : axis === 1 ? [u[0], 0, u[1]] : [u[0], u[1], 0];
          return V3.add(center, v);
        };
        this.segment(p(i), p(i + 1), color);
      }
  }
  cross(p, size, color) {
    for (let a = 0; a < 3; a++) {
      const d = [0, 0, 0];
      d[a] = size;
      this.segment(V3.sub(p, d), V3.add(p, d), color);
    }
  }
  array() { return new Float32Array(this.data); }
}
