//! Every margin, slack and epsilon of bspq in one place, each with why it
//! is what it is. The clip's own rule (1/8 unit) is Quake 3's; the rest are
//! ours: margins that make a culling or a shortcut safe (each larger than
//! the rounding it must absorb), and tolerances of geometry built from the
//! map at compile time.

// Quake 3's clip rule.

/// Quake 3's surface clip epsilon: traces stop this far (in units, along the
/// hit plane's normal) before the surface. It is a `double` in the reference,
/// so expressions that use it are evaluated in `f64`.
pub const SURFACE_CLIP_EPSILON: f64 = 0.125;

// The BSP walk.

/// Extra slack (units) the tree walk adds around a shifted plane so that a
/// brush touching the swept volume is never missed.
pub const TREE_WALK_SLACK: f32 = 1.0;

/// How far a shape reaches across a plane that is not axial in the
/// source's tree, as the reference lets it (a bound, not the support
/// distance: it visits more leaves than it must, which only adds leaves to
/// the order). The six development maps' answers agree with this and with
/// the exact support distance alike.
pub const SOURCE_FAR_REACH: f32 = 2048.0;

// The kernel's accelerations: what they may skip (see `trace::accel`).

/// How far outside a brush's axial box a swept box must stay to be skipped
/// (units): well above the clip's 1/8-unit touch zone plus f32 rounding.
pub const CULL_MARGIN: f32 = 1.0;

/// How far beyond where the world stops a move a scene still traces the
/// entities it meets (units): a move that touches an entity first comes
/// within the clip's 1/8-unit touch zone of it before that point, plus f32
/// rounding (see `scene`).
pub const ENTITY_STOP_MARGIN: f32 = 1.0;

/// How far a patch's bounds are grown for the source walk's culling: more
/// than the clip epsilon by which a patch is in reach (`trace::patch`).
pub const PATCH_CULL_MARGIN: f32 = 1.0;

/// How far inside every side of its brush a core stays (units): well above
/// the clip's 1/8-unit touch zone plus f32 rounding of the slab test.
pub const CORE_MARGIN: f32 = 1.0;

/// How far from an unlisted piece a moving box may pass and have the walk
/// decide differently: the walk's slack plus the distance at which a
/// contact counts (1/8), with room for rounding.
pub const UNLISTED_MARGIN: f32 = TREE_WALK_SLACK + 0.25;

/// Slack on each of a facet's planes when bounding a box's reach: a contact
/// counts 1/8 unit before a plane, with room for rounding.
pub const FACET_REACH_SLACK: f64 = 0.25;

// Exact sweeps of rounded and convex shapes.

/// How far out (units) the candidate test grows the shifted brush: more than
/// the distance at which the exact sweep counts a contact.
pub const CANDIDATE_MARGIN: f32 = 0.1;

/// Points closer than this (units) are one polyhedron vertex.
pub const VERTEX_WELD: f64 = 1e-3;

/// Room (units) left around the shape when cutting brushes down.
pub const CUT_MARGIN: f64 = 2.0;

/// A hit is refined by sweeping again over this many units either side of it.
pub const REFINE_SPAN: f32 = 1.0;

/// How close (units) a reported contact must leave the shape to the brush.
pub const CONTACT_TOLERANCE: f32 = 0.05;

// Validating world files.

/// Largest deviation from unit length accepted in a plane normal.
pub const NORMAL_LENGTH_TOLERANCE: f32 = 1e-3;

// Compiling maps: plane and polygon tolerances.

/// Thickness of a plane when the compiler classifies points against it.
pub const PLANE_SIDE_EPSILON: f64 = 0.01;

/// Two compiler planes are the same when normals differ by less than this per
/// component and distances by less than [`PLANE_DIST_EPSILON`].
pub const PLANE_NORMAL_EPSILON: f64 = 1e-5;

pub const PLANE_DIST_EPSILON: f64 = 0.01;

/// Corners closer than this (units) are one.
pub const BEVEL_WELD: f64 = 0.01;

/// How far beyond a patch's bounds grown by the hull box it is still listed
/// (units): above the clip's 1/8-unit touch zone and f32 rounding.
pub const HULL_PATCH_MARGIN: f32 = 1.0;

/// Grid points closer than this per component are the same point (degenerate columns).
pub const PATCH_POINT_EPSILON: f64 = 0.1;

/// First and last columns closer than this per component make a closed (wrapping) grid.
pub const PATCH_WRAP_EPSILON: f64 = 0.1;

/// Points within this distance of a plane lie on it (triangle planes, border sides).
pub const PATCH_PLANE_TRI_EPSILON: f64 = 0.1;

/// Two planes are equal when normal components differ by less than this...
pub const PATCH_NORMAL_EPSILON: f64 = 0.0001;

/// ...and distances by less than this.
pub const PATCH_DIST_EPSILON: f64 = 0.02;

/// Thickness of a plane when facet windings are chopped.
pub const PATCH_WINDING_EPSILON: f32 = 0.1;
