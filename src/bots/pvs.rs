//! Potentially visible sets and areas, as Quake 3's server answers
//! `inPVS`: per point, the leaf of the map's own tree that holds it and
//! that leaf's cluster and area; per pair, whether the second point is
//! potentially visible from the first.
//!
//! A pair is potentially visible when both points lie in a leaf with a
//! cluster and an area (not -1: in solid, or in the void around the map),
//! the first point's cluster row of the map's visibility data has the
//! second point's cluster set (a map without visibility data passes this
//! test for every pair), and their areas are connected: the same area, or
//! joined through a chain of open area portals. Portals are open unless
//! the request closes them, by index or by the pair of areas they join.

use super::{BotsError, SightMatrix};
use crate::math::Vec3;
use crate::world::vis::{self, Rows};
use crate::world::{AreaPortal, LeafVis, World};
use serde::{Deserialize, Serialize};

/// The most portals one request may close.
pub const MAX_CLOSED_PORTALS: usize = 4096;

/// A PVS request as written: `{"points":[…],"targets":[…],
/// "closed_portals":[…]}` (`targets` absent: the points themselves).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PvsLine {
    pub points: Vec<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<[f64; 3]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_portals: Option<Vec<PortalRef>>,
}

/// A portal to close: its index in the world's portal list, or the two
/// areas it joins (every portal between them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum PortalRef {
    Index(u32),
    Areas([i32; 2]),
}

/// A checked PVS request.
#[derive(Debug, Clone, PartialEq)]
pub struct Pvs {
    points: Vec<Vec3>,
    /// `None`: the points are the targets.
    targets: Option<Vec<Vec3>>,
    closed: Vec<PortalRef>,
}

impl PvsLine {
    /// N·M, as written (before any check).
    pub fn pairs(&self) -> usize {
        super::matrix_pairs(self.points.len(), self.targets.as_ref().map(Vec::len))
    }

    /// Checks the points, the matrix's size and the number of portals
    /// closed (which portals exist is checked against the world).
    pub fn check(&self) -> Result<Pvs, BotsError> {
        let points = super::points("points", &self.points)?;
        let targets = self
            .targets
            .as_deref()
            .map(|t| super::points("targets", t))
            .transpose()?;
        super::check_matrix(("points", &points), targets.as_deref())?;
        let closed = self.closed_portals.clone().unwrap_or_default();
        if closed.len() > MAX_CLOSED_PORTALS {
            return Err(BotsError::BadSetting {
                field: "closed_portals",
                rule: format!("at most {MAX_CLOSED_PORTALS} portals"),
            });
        }
        Ok(Pvs {
            points,
            targets,
            closed,
        })
    }
}

impl Pvs {
    pub fn points(&self) -> &[Vec3] {
        &self.points
    }

    pub fn targets(&self) -> &[Vec3] {
        self.targets.as_deref().unwrap_or(&self.points)
    }

    /// N·M.
    pub fn pairs(&self) -> usize {
        self.points.len() * self.targets().len()
    }
}

/// Where a point lies: the leaf of the map's own tree, its cluster and its
/// area (-1: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PointLeaf {
    pub leaf: u32,
    pub cluster: i32,
    pub area: i32,
}

/// An area portal as answers list it: its index (what `closed_portals`
/// names), the two areas it joins, and the mover that makes it (its index
/// in the map's entities and its inline model).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortalInfo {
    pub index: u32,
    pub areas: [i32; 2],
    pub entity: u32,
    pub model: String,
}

/// A PVS answer: where each point and target lies, the matrix, the
/// world's areas and portals.
#[derive(Debug, Clone, PartialEq)]
pub struct PvsAnswer {
    pub points: Vec<PointLeaf>,
    /// `None` when the request named no targets.
    pub targets: Option<Vec<PointLeaf>>,
    pub matrix: SightMatrix,
    /// Whether the map has visibility data (without it, every cluster sees
    /// every other).
    pub vised: bool,
    pub areas: usize,
    pub portals: Vec<PortalInfo>,
}

/// The portals of `world`, as answers list them.
pub fn portals(world: &World) -> Vec<PortalInfo> {
    world
        .source
        .area_portals
        .iter()
        .enumerate()
        .map(|(i, p)| PortalInfo {
            index: i as u32,
            areas: p.areas,
            entity: p.entity,
            model: format!("*{}", p.model),
        })
        .collect()
}

/// Which areas are connected: each area's group (areas of one group are
/// joined through open portals).
struct AreaGroups(Vec<u32>);

impl AreaGroups {
    /// The groups of `areas` areas when the portals not in `closed` are open.
    fn new(areas: usize, portals: &[AreaPortal], closed: &[bool]) -> Self {
        let mut parent: Vec<u32> = (0..areas as u32).collect();
        fn root(parent: &mut [u32], mut a: u32) -> u32 {
            while parent[a as usize] != a {
                let up = parent[parent[a as usize] as usize];
                parent[a as usize] = up;
                a = up;
            }
            a
        }
        for (p, &shut) in portals.iter().zip(closed) {
            if shut {
                continue;
            }
            // Checked when the world loaded: both areas exist.
            let (a, b) = (
                root(&mut parent, p.areas[0] as u32),
                root(&mut parent, p.areas[1] as u32),
            );
            parent[a.max(b) as usize] = a.min(b);
        }
        let groups = (0..areas as u32).map(|a| root(&mut parent, a)).collect();
        AreaGroups(groups)
    }

    /// Whether `a` and `b` are connected; never for area -1.
    fn connected(&self, a: i32, b: i32) -> bool {
        match (usize::try_from(a), usize::try_from(b)) {
            (Ok(a), Ok(b)) => self.0[a] == self.0[b],
            _ => false,
        }
    }
}

/// Which of `world`'s portals `closed` closes; an index past the list or
/// an area pair no portal joins is refused.
fn closed_portals(portals: &[AreaPortal], closed: &[PortalRef]) -> Result<Vec<bool>, BotsError> {
    let mut shut = vec![false; portals.len()];
    for &r in closed {
        match r {
            PortalRef::Index(i) => match shut.get_mut(i as usize) {
                Some(s) => *s = true,
                None => {
                    return Err(BotsError::BadSetting {
                        field: "closed_portals",
                        rule: format!(
                            "portal indices below {} (the world's portal count); {i} is not",
                            portals.len()
                        ),
                    })
                }
            },
            PortalRef::Areas([a, b]) => {
                let mut found = false;
                for (p, s) in portals.iter().zip(shut.iter_mut()) {
                    if p.areas == [a, b] || p.areas == [b, a] {
                        *s = true;
                        found = true;
                    }
                }
                if !found {
                    return Err(BotsError::BadSetting {
                        field: "closed_portals",
                        rule: format!("area pairs a portal joins; no portal joins {a} and {b}"),
                    });
                }
            }
        }
    }
    Ok(shut)
}

/// Checks `request` against `world`: the world has leaf clusters and
/// areas, and every portal it closes exists.
pub fn check_in(world: &World, request: &Pvs) -> Result<(), BotsError> {
    if world.source.leaf_vis.is_empty() {
        return Err(BotsError::NoVisibility);
    }
    closed_portals(world.source.area_portals, &request.closed).map(|_| ())
}

/// Where `p` lies in `world` (which has leaf clusters and areas).
fn locate(world: &World, leaf_vis: &[LeafVis], p: Vec3) -> PointLeaf {
    // A world with leaf clusters and areas has a source tree (checked
    // when it loaded), so the walk finds a leaf with a record.
    let leaf = vis::leaf_at(world, p).unwrap_or(0);
    let LeafVis { cluster, area } = leaf_vis.get(leaf).copied().unwrap_or(LeafVis {
        cluster: -1,
        area: -1,
    });
    PointLeaf {
        leaf: leaf as u32,
        cluster,
        area,
    }
}

/// Answers a PVS request through `world`: where every point and target
/// lies, and for each point and target whether the target is potentially
/// visible from the point (see the module docs). A world compiled without
/// leaf clusters and areas is refused ([`BotsError::NoVisibility`]).
pub fn pvs(world: &World, request: &Pvs) -> Result<PvsAnswer, BotsError> {
    let tree = &world.source;
    let leaf_vis = tree.leaf_vis;
    if leaf_vis.is_empty() {
        return Err(BotsError::NoVisibility);
    }
    let shut = closed_portals(tree.area_portals, &request.closed)?;
    let areas = vis::area_count(leaf_vis);
    let groups = AreaGroups::new(areas, tree.area_portals, &shut);
    // Checked when the world loaded.
    let rows = Rows::parse(tree.visibility, false).ok().flatten();
    let points: Vec<PointLeaf> = request
        .points
        .iter()
        .map(|&p| locate(world, leaf_vis, p))
        .collect();
    let targets: Option<Vec<PointLeaf>> = request.targets.as_ref().map(|t| {
        t.iter()
            .map(|&p| locate(world, leaf_vis, p))
            .collect::<Vec<_>>()
    });
    let columns = targets.as_deref().unwrap_or(&points);
    let mut visible = Vec::with_capacity(request.pairs());
    for from in &points {
        for to in columns {
            visible.push(potentially_visible(rows.as_ref(), &groups, from, to));
        }
    }
    Ok(PvsAnswer {
        matrix: SightMatrix {
            eyes: points.len(),
            targets: columns.len(),
            visible,
        },
        points,
        targets,
        vised: rows.is_some(),
        areas,
        portals: portals(world),
    })
}

/// The pair rule: both leaves have a cluster and an area, the row of
/// `from`'s cluster has `to`'s (or there is no visibility data), and the
/// areas are connected.
fn potentially_visible(
    rows: Option<&Rows>,
    groups: &AreaGroups,
    from: &PointLeaf,
    to: &PointLeaf,
) -> bool {
    let (Ok(a), Ok(b)) = (usize::try_from(from.cluster), usize::try_from(to.cluster)) else {
        return false;
    };
    rows.is_none_or(|r| r.sees(a, b)) && groups.connected(from.area, to.area)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn portal(a: i32, b: i32) -> AreaPortal {
        AreaPortal {
            areas: [a, b],
            entity: 0,
            model: 1,
        }
    }

    /// Areas 0–1–2 in a chain through portals 0 and 1, 3 alone; then
    /// closing either portal, by index or by its areas.
    #[test]
    fn areas_connect_through_open_portals() {
        let portals = [portal(0, 1), portal(2, 1)];
        let open = AreaGroups::new(4, &portals, &[false, false]);
        assert!(open.connected(0, 2) && open.connected(2, 0) && open.connected(1, 1));
        assert!(!open.connected(0, 3) && !open.connected(3, -1) && !open.connected(-1, -1));
        let shut = closed_portals(&portals, &[PortalRef::Areas([1, 2])]).unwrap();
        assert_eq!(shut, [false, true]);
        let split = AreaGroups::new(4, &portals, &shut);
        assert!(split.connected(0, 1) && !split.connected(0, 2) && !split.connected(1, 2));
        let shut = closed_portals(&portals, &[PortalRef::Index(0)]).unwrap();
        let split = AreaGroups::new(4, &portals, &shut);
        assert!(!split.connected(0, 1) && split.connected(1, 2));
        // Two portals between the same areas: closing one leaves the other.
        let twice = [portal(0, 1), portal(1, 0)];
        let one = closed_portals(&twice, &[PortalRef::Index(1)]).unwrap();
        assert!(AreaGroups::new(2, &twice, &one).connected(0, 1));
        let both = closed_portals(&twice, &[PortalRef::Areas([0, 1])]).unwrap();
        assert!(!AreaGroups::new(2, &twice, &both).connected(0, 1));
        assert!(closed_portals(&portals, &[PortalRef::Index(2)]).is_err());
        assert!(closed_portals(&portals, &[PortalRef::Areas([0, 2])]).is_err());
    }

    #[test]
    fn portal_refs_parse() {
        let line: PvsLine =
            serde_json::from_str(r#"{"points":[[0,0,0]],"closed_portals":[3,[1,2]]}"#).unwrap();
        assert_eq!(
            line.closed_portals.unwrap(),
            [PortalRef::Index(3), PortalRef::Areas([1, 2])]
        );
    }
}
