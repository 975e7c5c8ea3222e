//! Convex fragments of brushes, cut the same way by both compilers: the
//! solid-leaf tree ([`super::tree`]) cuts brushes, the onion hulls
//! ([`super::onion`]) cut brushes grown by a hull's box. A fragment is a
//! convex cell of one of them, given by its faces, each with its polygon.
//!
//! This module classifies a fragment against a plane, picks the plane that
//! splits a set of fragments best, and cuts fragments in two. Each compiler
//! says what a face records and how planes are numbered through
//! [`Planes`]; the geometry, the thick-plane policy
//! ([`PLANE_SIDE_EPSILON`]) and the splitter's score are the same for both.

use crate::margins::PLANE_SIDE_EPSILON;
use crate::math::{DVec3, Winding};

/// What a cut costs in the splitter's score, against one fragment of
/// imbalance between the two sides.
const SPLIT_COST: i64 = 5;
/// What a plane that is not axial costs in the splitter's score (axial
/// planes make cheaper node tests and cleaner cells).
const NON_AXIAL_COST: i64 = 2;

/// Where a fragment lies against a plane.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    Front,
    Back,
    Split,
}

/// A face of a fragment: the canonical plane it lies on, its outward plane
/// as the compiler records it (`P`), and its polygon.
#[derive(Clone)]
pub(super) struct Face<P> {
    pub canon: u32,
    pub plane: P,
    pub winding: Winding,
    /// Whether the face may still be chosen as a splitter on this path.
    pub candidate: bool,
}

/// A convex fragment of what `owner` names, given by its faces.
#[derive(Clone)]
pub(super) struct Fragment<O, P> {
    pub owner: O,
    pub faces: Vec<Face<P>>,
}

/// What a compiler knows of its planes, for cutting its fragments.
pub(super) trait Planes {
    /// What a fragment belongs to.
    type Owner: Clone;
    /// How a face records its outward plane.
    type FacePlane: Clone;

    /// Canonical plane `canon` (normal, distance) in f64.
    fn plane(&self, canon: u32) -> (DVec3, f64);
    fn is_axial(&self, canon: u32) -> bool;
    /// A face's outward plane in f64.
    fn face_plane(&self, plane: &Self::FacePlane) -> (DVec3, f64);
    /// Whether a face with outward plane `plane`, lying on canonical plane
    /// `canon`, faces the way the canonical plane does (its fragment then
    /// lies behind the plane).
    fn faces_along(&self, plane: &Self::FacePlane, canon: u32) -> bool;
    /// The outward planes of the caps of a fragment cut along canonical
    /// plane `canon`: the front half's (facing against the plane) and the
    /// back half's (facing along it).
    fn cap_planes(&self, canon: u32) -> [Self::FacePlane; 2];
}

/// The fragments a compiler's [`Planes`] cut.
pub(super) type FragmentOf<P> = Fragment<<P as Planes>::Owner, <P as Planes>::FacePlane>;

/// Where fragment `f` lies against canonical plane `canon`: by its own face
/// when it has one on the plane, else by its corners, against the thick plane.
pub(super) fn classify<P: Planes>(planes: &P, f: &FragmentOf<P>, canon: u32) -> Class {
    if let Some(face) = f.faces.iter().find(|x| x.canon == canon) {
        // The fragment lies behind its own face.
        return if planes.faces_along(&face.plane, canon) {
            Class::Back
        } else {
            Class::Front
        };
    }
    let (n, d) = planes.plane(canon);
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for face in &f.faces {
        for p in &face.winding.points {
            let t = p.dot(n) - d;
            lo = lo.min(t);
            hi = hi.max(t);
        }
    }
    if lo >= -PLANE_SIDE_EPSILON {
        Class::Front
    } else if hi <= PLANE_SIDE_EPSILON {
        Class::Back
    } else {
        Class::Split
    }
}

/// The canonical plane among the fragments' candidate faces that best
/// balances them while cutting the fewest (scoring at most
/// `max_candidates`), or `None` when no candidate face is left.
pub(super) fn choose_split<P: Planes>(
    planes: &P,
    fragments: &[FragmentOf<P>],
    max_candidates: usize,
) -> Option<u32> {
    let candidates: Vec<u32> = fragments
        .iter()
        .flat_map(|f| f.faces.iter().filter(|x| x.candidate).map(|x| x.canon))
        .collect();
    best_splitter(candidates, max_candidates, |c| {
        let (mut front, mut back, mut splits) = (0i64, 0i64, 0i64);
        for f in fragments {
            match classify(planes, f, c) {
                Class::Front => front += 1,
                Class::Back => back += 1,
                Class::Split => splits += 1,
            }
        }
        let shape = if planes.is_axial(c) {
            0
        } else {
            NON_AXIAL_COST
        };
        SPLIT_COST * splits + (front - back).abs() + shape
    })
}

/// The candidate plane with the lowest `score` (the first of equal ones),
/// scoring at most `max_candidates` of them (an even sample when there are
/// more); `None` when there is no candidate.
pub(super) fn best_splitter(
    mut candidates: Vec<u32>,
    max_candidates: usize,
    score: impl Fn(u32) -> i64,
) -> Option<u32> {
    candidates.sort_unstable();
    candidates.dedup();
    if candidates.len() > max_candidates {
        let step = candidates.len() as f64 / max_candidates as f64;
        candidates = (0..max_candidates)
            .map(|k| candidates[(k as f64 * step) as usize])
            .collect();
    }
    let mut best: Option<(i64, u32)> = None;
    for c in candidates {
        let s = score(c);
        if best.is_none_or(|(b, _)| s < b) {
            best = Some((s, c));
        }
    }
    best.map(|(_, c)| c)
}

/// Sorts the fragments to the two sides of canonical plane `canon`, cutting
/// those it crosses, and retires the faces on the plane as splitters.
pub(super) fn partition<P: Planes>(
    planes: &P,
    fragments: Vec<FragmentOf<P>>,
    canon: u32,
) -> (Vec<FragmentOf<P>>, Vec<FragmentOf<P>>) {
    let (mut front, mut back) = (Vec::new(), Vec::new());
    for mut f in fragments {
        let class = classify(planes, &f, canon);
        for face in f.faces.iter_mut() {
            if face.canon == canon {
                face.candidate = false;
            }
        }
        match class {
            Class::Front => front.push(f),
            Class::Back => back.push(f),
            Class::Split => {
                let (a, b) = split(planes, &f, canon);
                front.extend(a);
                back.extend(b);
            }
        }
    }
    (front, back)
}

/// Cuts a fragment in two along canonical plane `canon`, capping each half
/// with a face on the plane. A half left with fewer than four faces (no
/// volume) is dropped.
fn split<P: Planes>(
    planes: &P,
    f: &FragmentOf<P>,
    canon: u32,
) -> (Option<FragmentOf<P>>, Option<FragmentOf<P>>) {
    let (n, d) = planes.plane(canon);
    let mut front_faces = Vec::with_capacity(f.faces.len() + 1);
    let mut back_faces = Vec::with_capacity(f.faces.len() + 1);
    for face in &f.faces {
        let (a, b) = face.winding.split(n, d, PLANE_SIDE_EPSILON);
        if !a.is_empty() {
            front_faces.push(Face {
                winding: a,
                ..face.clone()
            });
        }
        if !b.is_empty() {
            back_faces.push(Face {
                winding: b,
                ..face.clone()
            });
        }
    }
    // The cap: the plane's polygon inside the fragment.
    let mut cap = Winding::base_for_plane(n, d);
    for face in &f.faces {
        let (normal, dist) = planes.face_plane(&face.plane);
        if !cap.clip_back(normal, dist, PLANE_SIDE_EPSILON) {
            break;
        }
    }
    if cap.is_empty() {
        // Numerically the plane misses the fragment: keep it on its bulkier side.
        return if front_faces.len() >= back_faces.len() {
            (Some(f.clone()), None)
        } else {
            (None, Some(f.clone()))
        };
    }
    let mut cap_front = cap.clone();
    cap_front.points.reverse();
    let [front_plane, back_plane] = planes.cap_planes(canon);
    let cap_face = |plane, winding| Face {
        canon,
        plane,
        winding,
        candidate: false,
    };
    front_faces.push(cap_face(front_plane, cap_front));
    back_faces.push(cap_face(back_plane, cap));
    let keep = |faces: Vec<_>| {
        (faces.len() >= 4).then(|| Fragment {
            owner: f.owner.clone(),
            faces,
        })
    };
    (keep(front_faces), keep(back_faces))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Planes as a table, canonical plane `i` facing `planes[i]`; faces
    /// keep their outward plane, and fragments own nothing.
    struct Table(Vec<(DVec3, f64)>);

    type Piece = Fragment<(), (DVec3, f64)>;

    impl Planes for Table {
        type Owner = ();
        type FacePlane = (DVec3, f64);
        fn plane(&self, canon: u32) -> (DVec3, f64) {
            self.0[canon as usize]
        }
        fn is_axial(&self, canon: u32) -> bool {
            let n = self.0[canon as usize].0;
            [n.x, n.y, n.z].iter().filter(|c| **c != 0.0).count() == 1
        }
        fn face_plane(&self, plane: &(DVec3, f64)) -> (DVec3, f64) {
            *plane
        }
        fn faces_along(&self, plane: &(DVec3, f64), canon: u32) -> bool {
            plane.0.dot(self.0[canon as usize].0) > 0.0
        }
        fn cap_planes(&self, canon: u32) -> [(DVec3, f64); 2] {
            let (n, d) = self.0[canon as usize];
            [(-n, -d), (n, d)]
        }
    }

    /// The box `lo..hi` as a fragment whose faces lie on canonical planes
    /// 0..6 (+x, +y, +z at `hi`, then facing the same way at `lo`), with
    /// canonical plane 6 the slanted plane x + y = 0 (normalised).
    fn cube(lo: f64, hi: f64) -> (Table, Piece) {
        let axes = [DVec3::X, DVec3::Y, DVec3::Z];
        let mut planes: Vec<(DVec3, f64)> = axes.iter().map(|&a| (a, hi)).collect();
        planes.extend(axes.iter().map(|&a| (a, lo)));
        planes.push((DVec3::new(1.0, 1.0, 0.0).normalize(), 0.0));
        let outward: Vec<(u32, (DVec3, f64))> = (0..3)
            .map(|k| (k as u32, (axes[k], hi)))
            .chain((0..3).map(|k| (k as u32 + 3, (-axes[k], -lo))))
            .collect();
        let faces = outward
            .iter()
            .map(|&(canon, (n, d))| {
                let mut winding = Winding::base_for_plane(n, d);
                for &(_, (m, e)) in &outward {
                    if m != n {
                        winding.clip_back(m, e, PLANE_SIDE_EPSILON);
                    }
                }
                Face {
                    canon,
                    plane: (n, d),
                    winding,
                    candidate: true,
                }
            })
            .collect();
        (Table(planes), Fragment { owner: (), faces })
    }

    #[test]
    fn a_fragment_lies_behind_its_own_faces_and_beside_far_planes() {
        let (table, piece) = cube(-1.0, 1.0);
        // Its own +x face at 1 (canonical 0): behind; its -x face at -1
        // lies on canonical 3 (+x at -1) facing against it: in front.
        assert!(classify(&table, &piece, 0) == Class::Back);
        assert!(classify(&table, &piece, 3) == Class::Front);
        // The slanted plane through the centre cuts it.
        assert!(classify(&table, &piece, 6) == Class::Split);
        let (_, small) = cube(0.25, 0.75);
        assert!(classify(&table, &small, 6) == Class::Front);
        let (_, other) = cube(-0.75, -0.25);
        assert!(classify(&table, &other, 6) == Class::Back);
    }

    #[test]
    fn a_cut_caps_both_halves_and_retires_the_plane() {
        let (table, piece) = cube(-1.0, 1.0);
        let (front, back) = partition(&table, vec![piece], 6);
        assert_eq!((front.len(), back.len()), (1, 1));
        for (half, side) in [(&front[0], -1.0), (&back[0], 1.0)] {
            // Each half keeps the pieces of the faces on its side and one cap.
            let cap = half
                .faces
                .iter()
                .filter(|f| f.canon == 6)
                .collect::<Vec<_>>();
            assert_eq!(cap.len(), 1);
            assert!(!cap[0].candidate);
            // The cap faces out of its half: away from the other half.
            let n = table.0[6].0;
            assert_eq!(cap[0].plane.0.dot(n).signum(), side);
            // Every corner of the half lies on its side of the cut.
            for f in &half.faces {
                for p in &f.winding.points {
                    assert!(-side * p.dot(n) >= -PLANE_SIDE_EPSILON);
                }
            }
            assert!(half.faces.len() >= 4);
        }
        // A later search for splitters finds the cut plane used up.
        let planes_left: Vec<u32> = front
            .iter()
            .chain(&back)
            .flat_map(|f| f.faces.iter().filter(|x| x.candidate).map(|x| x.canon))
            .collect();
        assert!(!planes_left.contains(&6));
    }

    /// The box `lo..hi` as a fragment over `table`: a face whose outward
    /// plane is a table plane, or its flip, lies on it and is a candidate;
    /// the others are not candidates (and lie on no table plane).
    fn boxed(table: &Table, lo: DVec3, hi: DVec3) -> Piece {
        let axes = [DVec3::X, DVec3::Y, DVec3::Z];
        let outward: Vec<(DVec3, f64)> = (0..3)
            .map(|k| (axes[k], hi[k]))
            .chain((0..3).map(|k| (-axes[k], -lo[k])))
            .collect();
        let faces = outward
            .iter()
            .enumerate()
            .map(|(i, &(n, d))| {
                let mut winding = Winding::base_for_plane(n, d);
                for &(m, e) in &outward {
                    if m != n {
                        winding.clip_back(m, e, PLANE_SIDE_EPSILON);
                    }
                }
                let canon = table
                    .0
                    .iter()
                    .position(|&(m, e)| (m, e) == (n, d) || (m, e) == (-n, -d))
                    .map_or(1000 + i as u32, |c| c as u32);
                Face {
                    canon,
                    plane: (n, d),
                    winding,
                    candidate: canon < 1000,
                }
            })
            .collect();
        Fragment { owner: (), faces }
    }

    #[test]
    fn the_splitter_balances_the_fragments() {
        // Four unit boxes in a row along x, with the planes between them as
        // candidates: x = 2 leaves two on each side, x = 1 and x = 3 three
        // and one. None cuts a box, so balance decides, not the order.
        let table = Table(vec![(DVec3::X, 1.0), (DVec3::X, 2.0), (DVec3::X, 3.0)]);
        let row: Vec<Piece> = (0..4)
            .map(|i| {
                let x = f64::from(i);
                boxed(
                    &table,
                    DVec3::new(x, 0.0, 0.0),
                    DVec3::new(x + 1.0, 1.0, 1.0),
                )
            })
            .collect();
        assert_eq!(choose_split(&table, &row, 48), Some(1));
        let (front, back) = partition(&table, row, 1);
        assert_eq!((front.len(), back.len()), (2, 2));
    }
}
