//! Box entities (players, corpses, missiles) as the reference traces them: a
//! temporary model of one axis-aligned brush, its sides +x, -x, +y, -y, +z,
//! -z in that order, contents BODY whatever the entity says. Each size is
//! built once as a world of one brush (so it is traced by the same kernel
//! as any map) and kept for the next scene that uses it.

use crate::compile::bevels::{self, BevelOptions};
use crate::compile::COMPILER_VERSION;
use crate::contents::CONTENTS_BODY;
use crate::map::{LoadError, Map};
use crate::math::Vec3;
use crate::world::{Brush, BrushSide, Leaf, Node, Plane, WorldData, WorldInfo};
use bytemuck::Zeroable;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

/// Most box sizes kept; past it the cache starts over (a client sending
/// endless sizes costs a compile per size, never unbounded memory).
const MAX_KEPT: usize = 4096;

type Key = [u32; 6];

static KEPT: LazyLock<Mutex<HashMap<Key, Arc<Map>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The model of a box `mins..maxs` (checked finite and ordered by the caller).
pub fn box_model(mins: Vec3, maxs: Vec3) -> Result<Arc<Map>, LoadError> {
    let key: Key = std::array::from_fn(|i| {
        let corner = if i < 3 { mins } else { maxs };
        corner[i % 3].to_bits()
    });
    if let Some(found) = kept().get(&key) {
        return Ok(found.clone());
    }
    let built = Arc::new(Map::from_data(box_world(mins, maxs))?);
    let mut kept = kept();
    if kept.len() >= MAX_KEPT {
        kept.clear();
    }
    kept.insert(key, built.clone());
    Ok(built)
}

/// The cache, even if a thread panicked while holding it (it holds only
/// finished models).
fn kept() -> std::sync::MutexGuard<'static, HashMap<Key, Arc<Map>>> {
    KEPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A world of the box's one brush, its sides +x, -x, +y, -y, +z, -z (the
/// reference's order, which settles ties between sides). Built directly
/// rather than compiled, as a box may be flat or a point (a missile), which
/// the compiler has no cell for but a sweep still hits: the tree is a chain
/// of the six side planes, each front an empty leaf, the last back the
/// brush's leaf; the source tree is the reference's single leaf.
fn box_world(mins: Vec3, maxs: Vec3) -> WorldData {
    let mut world = WorldData::default();
    for axis in 0..3 {
        let normal = Vec3::AXES[axis];
        world.planes.push(Plane::new(normal, maxs[axis]));
        world.planes.push(Plane::new(-normal, -mins[axis]));
    }
    world.brush_sides = (0..6)
        .map(|plane| BrushSide {
            plane,
            surface_flags: 0,
        })
        .collect();
    world.brushes.push(Brush {
        first_side: 0,
        num_sides: 6,
        contents: CONTENTS_BODY,
        source_index: 0,
        mins: mins.to_array(),
        maxs: maxs.to_array(),
    });
    let empty = Leaf::zeroed();
    let solid = Leaf {
        contents: CONTENTS_BODY,
        num_brushes: 1,
        ..empty
    };
    world.leaves = [[empty; 6].as_slice(), &[solid]].concat();
    world.leaf_brushes.push(0);
    world.nodes = (0..6u32)
        .map(|side| Node {
            plane: side,
            // Front (outside this side): an empty leaf of its own; back:
            // the next side, and behind the last, the brush.
            children: [
                -1 - side as i32,
                if side < 5 { side as i32 + 1 } else { -7 },
            ],
            flags: 0,
        })
        .collect();
    world.source_leaves = vec![solid];
    world.source_leaf_brushes = vec![0];
    world.mins = mins.to_array();
    world.maxs = maxs.to_array();
    world.info = WorldInfo {
        source_name: "box".into(),
        compiler_version: COMPILER_VERSION.into(),
        source_brushes: 1,
        source_brush_sides: 6,
        source_planes: 6,
        ..WorldInfo::default()
    };
    let (ranges, bevels, _) = bevels::build(&world.view(), &BevelOptions::default());
    world.shape_bevel_ranges = ranges;
    world.shape_bevels = bevels;
    world
}
