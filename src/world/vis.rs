//! What potentially-visible-set queries read in a world: the leaf of the
//! source's tree that holds a point, each leaf's cluster and area, the
//! map's visibility rows and its area portals (all in [`SourceTree`]),
//! and the checks a loaded file's copies of them pass.

use super::{AreaPortal, LeafVis, SourceTree, World};
use crate::math::Vec3;

/// The map's visibility rows, their header checked.
#[derive(Debug, Clone, Copy)]
pub struct Rows<'a> {
    clusters: usize,
    row_bytes: usize,
    rows: &'a [u8],
}

impl<'a> Rows<'a> {
    /// Reads the visibility data as [`SourceTree::visibility`] lays it out:
    /// `None` when there is none; an error when the header does not fit
    /// the rows (a row too short for every cluster's bit, or the rows not
    /// filling `bytes`, beyond `slack` bytes after them).
    pub fn parse(bytes: &'a [u8], slack: bool) -> Result<Option<Self>, String> {
        if bytes.is_empty() {
            return Ok(None);
        }
        let word = |at: usize| {
            bytes
                .get(at..at + 4)
                .map(|w| i32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        };
        let (Some(clusters), Some(row_bytes)) = (word(0), word(4)) else {
            return Err(format!(
                "visibility data of {} bytes has no header (8 bytes)",
                bytes.len()
            ));
        };
        let (Ok(clusters), Ok(row_bytes)) = (usize::try_from(clusters), usize::try_from(row_bytes))
        else {
            return Err(format!(
                "visibility header: {clusters} clusters, rows of {row_bytes} bytes"
            ));
        };
        if row_bytes < clusters.div_ceil(8) {
            return Err(format!(
                "visibility rows of {row_bytes} bytes cannot hold {clusters} clusters' bits"
            ));
        }
        let len = clusters
            .checked_mul(row_bytes)
            .and_then(|n| n.checked_add(8))
            .filter(|&n| n == bytes.len() || (slack && n < bytes.len()))
            .ok_or_else(|| {
                format!(
                    "visibility data of {} bytes for {clusters} rows of {row_bytes} bytes",
                    bytes.len()
                )
            })?;
        Ok(Some(Rows {
            clusters,
            row_bytes,
            rows: &bytes[8..len],
        }))
    }

    /// The number of clusters the rows cover.
    pub fn clusters(&self) -> usize {
        self.clusters
    }

    /// The header and rows, without any bytes after them.
    pub fn bytes_len(&self) -> usize {
        8 + self.rows.len()
    }

    /// Whether cluster `to` is potentially visible from cluster `from`
    /// (both below [`Rows::clusters`]).
    #[inline]
    pub fn sees(&self, from: usize, to: usize) -> bool {
        self.rows[from * self.row_bytes + to / 8] & (1 << (to % 8)) != 0
    }
}

/// The leaf of the source's tree that holds `p` (`None` when the world has
/// no source tree): at each node, the front child when `p`'s distance to
/// the plane is at least 0 (a point on the plane goes to the front), as
/// the reference walks its tree, in single precision as it does.
pub fn leaf_at(world: &World, p: Vec3) -> Option<usize> {
    let tree = &world.source;
    if !tree.is_present() {
        return None;
    }
    let mut child = tree.root();
    // Validation made the tree a tree: a walk ends within its depth.
    while child >= 0 {
        let node = &tree.nodes[child as usize];
        let plane = &world.planes[node.plane as usize];
        let d = match plane.axis {
            axis @ 0..=2 => p[axis as usize] - plane.dist,
            _ => {
                let n = plane.normal;
                n[0] * p.x + n[1] * p.y + n[2] * p.z - plane.dist
            }
        };
        child = node.children[usize::from(d < 0.0)];
    }
    Some((-1 - child) as usize)
}

/// The number of areas: one more than the largest area of a leaf.
pub fn area_count(leaf_vis: &[LeafVis]) -> usize {
    leaf_vis
        .iter()
        .map(|l| usize::try_from(l.area + 1).unwrap_or(0))
        .max()
        .unwrap_or(0)
}

/// Checks the visibility records of a world (none at all is fine): one
/// record per source leaf, clusters in `-1..count` (any from -1 when the
/// map has no visibility data), areas in `-1..leaves`, the rows exactly
/// filling their bytes, and portals joining two different areas below
/// the area count.
pub fn check(tree: &SourceTree) -> Result<(), String> {
    if tree.leaf_vis.is_empty() {
        if !tree.visibility.is_empty() || !tree.area_portals.is_empty() {
            return Err("visibility data or area portals without leaf clusters and areas".into());
        }
        return Ok(());
    }
    if tree.leaf_vis.len() != tree.leaves.len() {
        return Err(format!(
            "{} leaf clusters and areas for {} source leaves",
            tree.leaf_vis.len(),
            tree.leaves.len()
        ));
    }
    let rows = Rows::parse(tree.visibility, false)?;
    let leaves = tree.leaves.len() as i64;
    for (i, l) in tree.leaf_vis.iter().enumerate() {
        let clusters = rows.map_or(i64::from(i32::MAX), |r| r.clusters as i64);
        if l.cluster < -1 || i64::from(l.cluster) >= clusters {
            return Err(format!(
                "source leaf {i}: cluster {} outside -1..{clusters}",
                l.cluster
            ));
        }
        if l.area < -1 || i64::from(l.area) >= leaves {
            return Err(format!(
                "source leaf {i}: area {} outside -1..{leaves}",
                l.area
            ));
        }
    }
    check_portals(tree.area_portals, area_count(tree.leaf_vis))
}

fn check_portals(portals: &[AreaPortal], areas: usize) -> Result<(), String> {
    for (i, p) in portals.iter().enumerate() {
        let [a, b] = p.areas;
        let ok = |x: i32| usize::try_from(x).is_ok_and(|x| x < areas);
        if !ok(a) || !ok(b) || a == b {
            return Err(format!(
                "area portal {i} joins areas {a} and {b} (the world has {areas})"
            ));
        }
    }
    Ok(())
}
