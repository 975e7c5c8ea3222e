//! One pass over a world that proves every index the kernel follows is in
//! range, every plane usable and the tree a proper tree. After it, the
//! kernel reads the arrays without further checks (and cannot panic or loop).

use super::{format::FormatError, World};
use crate::margins::NORMAL_LENGTH_TOLERANCE;

/// Deepest tree accepted (the compiler refuses to build deeper ones).
pub const MAX_TREE_DEPTH: usize = 2048;

fn invalid(msg: String) -> FormatError {
    FormatError::Invalid(msg)
}

fn check_range(
    what: &str,
    index: usize,
    first: u32,
    count: u32,
    len: usize,
) -> Result<(), FormatError> {
    let end = first as u64 + count as u64;
    if end > len as u64 {
        return Err(invalid(format!(
            "{what} {index}: range {first}+{count} exceeds {len}"
        )));
    }
    Ok(())
}

fn check_index(what: &str, index: usize, value: u32, len: usize) -> Result<(), FormatError> {
    if value as usize >= len {
        return Err(invalid(format!(
            "{what} {index}: index {value} out of range (count {len})"
        )));
    }
    Ok(())
}

fn sign_bits(n: [f32; 3]) -> u32 {
    (n[0] < 0.0) as u32 | ((n[1] < 0.0) as u32) << 1 | ((n[2] < 0.0) as u32) << 2
}

/// Checks everything the kernel relies on.
pub fn validate(world: &World) -> Result<(), FormatError> {
    for (i, p) in world.planes.iter().enumerate() {
        let n = p.normal;
        if !n
            .iter()
            .chain(std::iter::once(&p.dist))
            .all(|v| v.is_finite())
        {
            return Err(invalid(format!("plane {i} is not finite")));
        }
        let len2 = n[0] * n[0] + n[1] * n[1] + n[2] * n[2];
        if (len2.sqrt() - 1.0).abs() > NORMAL_LENGTH_TOLERANCE {
            return Err(invalid(format!("plane {i} normal is not unit length")));
        }
        let expected_axis = super::Plane::new(glam::Vec3::from_array(n), p.dist).axis;
        if p.axis != expected_axis || p.sign_bits != sign_bits(n) {
            return Err(invalid(format!(
                "plane {i} has inconsistent axis or sign bits"
            )));
        }
    }
    for (i, b) in world.brushes.iter().enumerate() {
        check_range(
            "brush",
            i,
            b.first_side,
            b.num_sides,
            world.brush_sides.len(),
        )?;
    }
    for (i, s) in world.brush_sides.iter().enumerate() {
        check_index("brush side", i, s.plane, world.planes.len())?;
    }
    check_leaf_lists(
        world,
        "",
        world.leaves,
        world.leaf_brushes,
        world.leaf_patches,
    )?;
    check_tree(
        TreeKind::Compiled,
        world.nodes,
        world.leaves,
        world.planes.len(),
    )?;
    validate_source_tree(world)?;
    super::vis::check(&world.source).map_err(invalid)?;
    for (i, p) in world.patch_planes.iter().enumerate() {
        if !p.plane.iter().all(|v| v.is_finite()) {
            return Err(invalid(format!("patch plane {i} is not finite")));
        }
        if p.sign_bits != sign_bits([p.plane[0], p.plane[1], p.plane[2]]) {
            return Err(invalid(format!(
                "patch plane {i} has inconsistent sign bits"
            )));
        }
    }
    for (i, p) in world.patches.iter().enumerate() {
        check_range(
            "patch facets of patch",
            i,
            p.first_facet,
            p.num_facets,
            world.facets.len(),
        )?;
        check_range(
            "patch planes of patch",
            i,
            p.first_plane,
            p.num_planes,
            world.patch_planes.len(),
        )?;
        if !p.mins.iter().chain(p.maxs.iter()).all(|v| v.is_finite()) {
            return Err(invalid(format!("patch {i} bounds are not finite")));
        }
    }
    for (i, f) in world.facets.iter().enumerate() {
        check_index(
            "facet surface plane",
            i,
            f.surface_plane,
            world.patch_planes.len(),
        )?;
        check_range(
            "facet borders of facet",
            i,
            f.first_border,
            f.num_borders,
            world.facet_borders.len(),
        )?;
        if f.num_borders as usize > super::MAX_FACET_BORDERS {
            return Err(invalid(format!(
                "facet {i} has {} borders (at most {})",
                f.num_borders,
                super::MAX_FACET_BORDERS
            )));
        }
    }
    for (i, b) in world.facet_borders.iter().enumerate() {
        check_index("facet border", i, b.plane, world.patch_planes.len())?;
    }
    validate_hulls(world)?;
    if !world
        .mins
        .iter()
        .chain(world.maxs.iter())
        .all(|v| v.is_finite())
    {
        return Err(invalid("world bounds are not finite".into()));
    }
    super::bevels::validate(world)?;
    Ok(())
}

/// The source's tree, when the world carries one: a proper tree as
/// [`check_tree`] requires, with brush and patch lists in range.
fn validate_source_tree(world: &World) -> Result<(), FormatError> {
    let tree = &world.source;
    if !tree.is_present() {
        return if tree.nodes.is_empty()
            && tree.leaf_brushes.is_empty()
            && tree.leaf_patches.is_empty()
        {
            Ok(())
        } else {
            Err(invalid("source tree records without source leaves".into()))
        };
    }
    check_tree(
        TreeKind::Source,
        tree.nodes,
        tree.leaves,
        world.planes.len(),
    )?;
    check_leaf_lists(
        world,
        "source ",
        tree.leaves,
        tree.leaf_brushes,
        tree.leaf_patches,
    )
}

/// A tree's leaf lists: every leaf's ranges within them, every entry a
/// brush or patch of the world. `what` prefixes the messages.
fn check_leaf_lists(
    world: &World,
    what: &str,
    leaves: &[super::Leaf],
    leaf_brushes: &[u32],
    leaf_patches: &[u32],
) -> Result<(), FormatError> {
    let [brush, patch, brushes_of, patches_of] = [
        "leaf brush",
        "leaf patch",
        "leaf brushes of leaf",
        "leaf patches of leaf",
    ]
    .map(|label| format!("{what}{label}"));
    for (i, &b) in leaf_brushes.iter().enumerate() {
        check_index(&brush, i, b, world.brushes.len())?;
    }
    for (i, &p) in leaf_patches.iter().enumerate() {
        check_index(&patch, i, p, world.patches.len())?;
    }
    for (i, l) in leaves.iter().enumerate() {
        check_range(
            &brushes_of,
            i,
            l.first_brush,
            l.num_brushes,
            leaf_brushes.len(),
        )?;
        check_range(
            &patches_of,
            i,
            l.first_patch,
            l.num_patches,
            leaf_patches.len(),
        )?;
    }
    Ok(())
}

/// Which tree [`check_tree`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeKind {
    /// The compiled tree: every leaf is in it.
    Compiled,
    /// The source's tree: its file may hold leaves no node reaches (a
    /// Quake 3 map's leaf 0 and its brush models' leaves), and another
    /// compiler's may share a leaf between nodes (harmless: the walk still
    /// meets each node once per piece of the move).
    Source,
}

/// Nodes are stored parent before child, so a child index greater than its
/// parent's makes cycles impossible; every node but the root must be
/// referenced exactly once, every leaf once (the source's tree: any number
/// of times), and no path may exceed the depth limit.
pub fn check_tree(
    kind: TreeKind,
    nodes: &[super::Node],
    leaves: &[super::Leaf],
    planes: usize,
) -> Result<(), FormatError> {
    let what = match kind {
        TreeKind::Compiled => "",
        TreeKind::Source => "source ",
    };
    if leaves.is_empty() {
        return Err(invalid(format!("the {what}tree has no leaves")));
    }
    if nodes.is_empty() {
        return if leaves.len() == 1 {
            Ok(())
        } else {
            Err(invalid(format!("{what}leaves without a tree")))
        };
    }
    let mut node_refs = vec![0u8; nodes.len()];
    let mut leaf_refs = vec![0u8; leaves.len()];
    let mut depth = vec![0u32; nodes.len()];
    let plane_of = format!("{what}node plane of node");
    for (i, node) in nodes.iter().enumerate() {
        check_index(&plane_of, i, node.plane, planes)?;
        if i > 0 && node_refs[i] != 1 {
            return Err(invalid(format!(
                "{what}node {i} is referenced {} times (must be once)",
                node_refs[i]
            )));
        }
        for &child in &node.children {
            if child >= 0 {
                let c = child as usize;
                if c <= i || c >= nodes.len() {
                    return Err(invalid(format!(
                        "{what}node {i}: child node {child} breaks parent-before-child order"
                    )));
                }
                node_refs[c] = node_refs[c].saturating_add(1);
                depth[c] = depth[i] + 1;
                if depth[c] as usize > MAX_TREE_DEPTH {
                    return Err(invalid(format!("{what}tree deeper than {MAX_TREE_DEPTH}")));
                }
            } else {
                let leaf = (-1 - child as i64) as usize;
                if leaf >= leaves.len() {
                    return Err(invalid(format!("{what}node {i}: leaf {leaf} out of range")));
                }
                leaf_refs[leaf] = leaf_refs[leaf].saturating_add(1);
            }
        }
    }
    let once = |r: u8| r == 1 || kind == TreeKind::Source;
    if let Some(leaf) = leaf_refs.iter().position(|&r| !once(r)) {
        return Err(invalid(format!(
            "{what}leaf {leaf} is referenced {} times (must be once)",
            leaf_refs[leaf]
        )));
    }
    Ok(())
}

fn bad_hulls(msg: String) -> FormatError {
    FormatError::InvalidHulls(msg)
}

/// The onion hulls: sane specs, one record per leaf and hull, lists in range,
/// and solidity bits that agree with the records.
fn validate_hulls(world: &World) -> Result<(), FormatError> {
    let hulls = &world.info.hulls;
    if hulls.len() > super::MAX_HULLS {
        return Err(bad_hulls(format!(
            "{} hulls (limit {})",
            hulls.len(),
            super::MAX_HULLS
        )));
    }
    for (i, h) in hulls.iter().enumerate() {
        let finite = h.mins.iter().chain(&h.maxs).all(|v| v.is_finite());
        if !finite || (0..3).any(|k| h.mins[k] > h.maxs[k]) {
            return Err(bad_hulls(format!(
                "hull {i} ({:?}) has a non-finite or inverted box",
                h.name
            )));
        }
        if hulls[..i].iter().any(|o| o.name == h.name) {
            return Err(bad_hulls(format!("hull name {:?} appears twice", h.name)));
        }
    }
    if hulls.is_empty() {
        let stray = !world.leaf_hull_solid.is_empty()
            || !world.hull_leaves.is_empty()
            || !world.hull_leaf_brushes.is_empty()
            || !world.hull_leaf_patches.is_empty();
        return if stray {
            Err(bad_hulls("hull records in a world without hulls".into()))
        } else {
            Ok(())
        };
    }
    if world.leaf_hull_solid.len() != world.leaves.len() {
        return Err(bad_hulls(format!(
            "{} solidity bitsets for {} leaves",
            world.leaf_hull_solid.len(),
            world.leaves.len()
        )));
    }
    let expected = world.leaves.len() as u64 * hulls.len() as u64;
    if world.hull_leaves.len() as u64 != expected {
        return Err(bad_hulls(format!(
            "{} hull leaf records, expected leaves × hulls = {expected}",
            world.hull_leaves.len()
        )));
    }
    let range = |what: &str, i: usize, first: u32, count: u32, len: usize| {
        if first as u64 + count as u64 > len as u64 {
            Err(bad_hulls(format!(
                "{what} of hull leaf record {i}: range {first}+{count} exceeds {len}"
            )))
        } else {
            Ok(())
        }
    };
    for (i, r) in world.hull_leaves.iter().enumerate() {
        range(
            "brushes",
            i,
            r.first_brush,
            r.num_brushes,
            world.hull_leaf_brushes.len(),
        )?;
        range(
            "patches",
            i,
            r.first_patch,
            r.num_patches,
            world.hull_leaf_patches.len(),
        )?;
    }
    for (i, &b) in world.hull_leaf_brushes.iter().enumerate() {
        if b as usize >= world.brushes.len() {
            return Err(bad_hulls(format!(
                "hull leaf brush {i}: index {b} out of range (count {})",
                world.brushes.len()
            )));
        }
    }
    for (i, &p) in world.hull_leaf_patches.iter().enumerate() {
        if p as usize >= world.patches.len() {
            return Err(bad_hulls(format!(
                "hull leaf patch {i}: index {p} out of range (count {})",
                world.patches.len()
            )));
        }
    }
    for (i, r) in world.hull_leaves.iter().enumerate() {
        let listed = &world.hull_leaf_brushes[r.first_brush as usize..][..r.num_brushes as usize];
        let contents = listed
            .iter()
            .fold(0, |acc, &b| acc | world.brushes[b as usize].contents);
        if contents != r.contents {
            return Err(bad_hulls(format!(
                "hull leaf record {i}: contents {:#x} are not those of its brushes ({contents:#x})",
                r.contents
            )));
        }
    }
    for (leaf, &bits) in world.leaf_hull_solid.iter().enumerate() {
        let records = &world.hull_leaves[leaf * hulls.len()..][..hulls.len()];
        let expected = records
            .iter()
            .enumerate()
            .fold(0u32, |acc, (h, r)| acc | ((r.num_brushes > 0) as u32) << h);
        if bits != expected {
            return Err(bad_hulls(format!(
                "leaf {leaf}: solidity bits {bits:#x} disagree with its brush lists ({expected:#x})"
            )));
        }
    }
    Ok(())
}
