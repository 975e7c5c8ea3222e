//! Shape bevels: extra planes per brush that only sphere, capsule, cylinder
//! and convex sweeps read (Melax 2000). Each supports its brush without
//! cutting it, and stops a plane-shifted rounded shape before the corner
//! where two far-apart sides' shifted planes cross (where plane shifting
//! over-approximates). Boxes and rays never read them, as in Quake 3. In
//! the file: the optional sections `shape_bevel_ranges` (one [`BevelRange`]
//! per brush, or none) and `shape_bevels`.

use super::format::FormatError;
use super::World;
use crate::margins::NORMAL_LENGTH_TOLERANCE;
use bytemuck::{Pod, Zeroable};

/// Which of `shape_bevels` belong to one brush.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq, Eq, Default)]
pub struct BevelRange {
    pub first: u32,
    pub count: u32,
}

/// One bevel plane: `normal·x <= dist` holds on the whole brush, with
/// equality somewhere on it; `surface_flags` are those of the side it leans
/// against most (reported when a shape hits the bevel).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq)]
pub struct ShapeBevel {
    pub normal: [f32; 3],
    pub dist: f32,
    pub surface_flags: u32,
}

const _: () = assert!(std::mem::size_of::<BevelRange>() == 8);
const _: () = assert!(std::mem::size_of::<ShapeBevel>() == 20);

/// Why the shape-bevel sections were rejected.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BevelError {
    #[error("{ranges} bevel ranges for {brushes} brushes (want one per brush, or none)")]
    RangeCount { ranges: usize, brushes: usize },
    #[error("brush {brush}: bevels {first}+{count} exceed the {len} bevels")]
    RangeOutOfBounds {
        brush: usize,
        first: u32,
        count: u32,
        len: usize,
    },
    #[error("bevel {0} is not finite")]
    NotFinite(usize),
    #[error("bevel {0} normal is not unit length")]
    NotUnit(usize),
    #[error("{0} bevels but no ranges naming them")]
    Orphans(usize),
}

impl From<BevelError> for FormatError {
    fn from(e: BevelError) -> Self {
        FormatError::Invalid(format!("shape bevels: {e}"))
    }
}

/// Checks what the shape sweep relies on: one range per brush (or no
/// bevels at all), every range inside the bevel list, every plane usable.
pub fn validate(world: &World) -> Result<(), BevelError> {
    let (ranges, bevels) = (world.shape_bevel_ranges, world.shape_bevels);
    if ranges.is_empty() {
        return match bevels.len() {
            0 => Ok(()),
            n => Err(BevelError::Orphans(n)),
        };
    }
    if ranges.len() != world.brushes.len() {
        return Err(BevelError::RangeCount {
            ranges: ranges.len(),
            brushes: world.brushes.len(),
        });
    }
    for (brush, r) in ranges.iter().enumerate() {
        if r.first as u64 + r.count as u64 > bevels.len() as u64 {
            return Err(BevelError::RangeOutOfBounds {
                brush,
                first: r.first,
                count: r.count,
                len: bevels.len(),
            });
        }
    }
    for (i, b) in bevels.iter().enumerate() {
        let n = b.normal;
        if !n.iter().chain([&b.dist]).all(|v| v.is_finite()) {
            return Err(BevelError::NotFinite(i));
        }
        let len = (n[0] * n[0] + n[1] * n[1] + n[2] * n[2]).sqrt();
        if (len - 1.0).abs() > NORMAL_LENGTH_TOLERANCE {
            return Err(BevelError::NotUnit(i));
        }
    }
    Ok(())
}
