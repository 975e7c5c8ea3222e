//! Sight matrices: whether anything in a mask lies between each of N eyes
//! and each of M targets (or every pair of the eyes), answered as the N·M
//! any-hit rays [`crate::trace::any_hit`] would answer one by one, split
//! over every core it may use.

use super::BotsError;
use crate::math::Vec3;
use crate::scene::{PlacedScene, ENTITY_NONE};
use crate::trace::{BatchOptions, Kernel, TraceQuery};
use serde::{Deserialize, Serialize};

/// The most eye-target pairs one matrix may ask (a 1024 × 1024 matrix):
/// about a second of one core on the development maps, and 1 MiB of
/// answer characters.
pub const MAX_SIGHT_PAIRS: usize = 1 << 20;

/// A sight matrix as written: `{"eyes":[…],"targets":[…],"mask":N}`
/// (`targets` absent: the eyes themselves; `mask` default MASK_SOLID, as
/// for any query line).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SightLine {
    pub eyes: Vec<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<[f64; 3]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<u32>,
}

/// A checked sight matrix request.
#[derive(Debug, Clone, PartialEq)]
pub struct Sight {
    eyes: Vec<Vec3>,
    /// `None`: the eyes are the targets.
    targets: Option<Vec<Vec3>>,
    mask: u32,
}

impl SightLine {
    /// N·M, as written (before any check).
    pub fn pairs(&self) -> usize {
        super::matrix_pairs(self.eyes.len(), self.targets.as_ref().map(Vec::len))
    }

    /// Checks the points and the matrix's size.
    pub fn check(&self) -> Result<Sight, BotsError> {
        let eyes = super::points("eyes", &self.eyes)?;
        let targets = self
            .targets
            .as_deref()
            .map(|t| super::points("targets", t))
            .transpose()?;
        Sight::new(
            eyes,
            targets,
            self.mask.unwrap_or(crate::contents::MASK_SOLID),
        )
    }
}

impl Sight {
    /// `eyes` to `targets` (`None`: to the eyes), at most
    /// [`MAX_SIGHT_PAIRS`] pairs; every point must be one a ray takes.
    pub fn new(eyes: Vec<Vec3>, targets: Option<Vec<Vec3>>, mask: u32) -> Result<Self, BotsError> {
        super::check_matrix(("eyes", &eyes), targets.as_deref())?;
        let sight = Sight {
            eyes,
            targets,
            mask,
        };
        Ok(sight)
    }

    pub fn eyes(&self) -> &[Vec3] {
        &self.eyes
    }

    pub fn targets(&self) -> &[Vec3] {
        self.targets.as_deref().unwrap_or(&self.eyes)
    }

    pub fn mask(&self) -> u32 {
        self.mask
    }

    /// N·M.
    pub fn pairs(&self) -> usize {
        self.eyes.len() * self.targets().len()
    }

    /// Pair `i` (eye `i / M`, target `i % M`) as its eye and target.
    #[inline(always)]
    fn ends(&self, i: usize) -> (Vec3, Vec3) {
        let targets = self.targets();
        (self.eyes[i / targets.len()], targets[i % targets.len()])
    }

    /// Pair `i`'s any-hit ray (points checked when the request was).
    #[inline(always)]
    pub fn query(&self, i: usize) -> TraceQuery {
        let (eye, target) = self.ends(i);
        TraceQuery {
            start: eye,
            end: target,
            mins: Vec3::ZERO,
            maxs: Vec3::ZERO,
            mask: self.mask,
            shape: None,
            exact: false,
        }
    }
}

/// The answers, row by row: entry `eye * targets + target` is true when
/// nothing in the mask lies between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SightMatrix {
    pub eyes: usize,
    pub targets: usize,
    pub visible: Vec<bool>,
}

impl SightMatrix {
    fn of(sight: &Sight, hits: Vec<bool>) -> Self {
        SightMatrix {
            eyes: sight.eyes.len(),
            targets: sight.targets().len(),
            visible: hits.into_iter().map(|hit| !hit).collect(),
        }
    }

    /// One string per eye, one character per target: `1` visible, `0` not.
    pub fn rows(&self) -> Vec<String> {
        (0..self.eyes)
            .map(|e| {
                self.visible[e * self.targets..(e + 1) * self.targets]
                    .iter()
                    .map(|&v| if v { '1' } else { '0' })
                    .collect()
            })
            .collect()
    }

    /// [`SightMatrix::packed`] read back (`None` when `bytes` do not hold
    /// exactly `eyes · targets` entries).
    pub fn from_packed(eyes: usize, targets: usize, bytes: &[u8]) -> Option<Self> {
        let n = eyes.checked_mul(targets)?;
        if bytes.len() != n.div_ceil(8) {
            return None;
        }
        Some(SightMatrix {
            eyes,
            targets,
            visible: (0..n).map(|i| bytes[i / 8] >> (i % 8) & 1 == 1).collect(),
        })
    }

    /// The entries packed eight to a byte in row order, the first entry in
    /// the lowest bit of the first byte.
    pub fn packed(&self) -> Vec<u8> {
        let mut bytes = vec![0u8; self.visible.len().div_ceil(8)];
        for (i, _) in self.visible.iter().enumerate().filter(|(_, &v)| v) {
            bytes[i / 8] |= 1 << (i % 8);
        }
        bytes
    }
}

/// The sight matrix through `world`: pair `i` is `!any_hit` of
/// [`Sight::query`]`(i)`: the single any-hit of each pair, the pairs split
/// over `options`' threads (the batch's sifting first pass did not pay
/// here: see the benchmark log's "Bots").
pub fn sight_matrix(world: &Kernel, sight: &Sight, options: &BatchOptions) -> SightMatrix {
    let hits = crate::trace::run_batch(sight.pairs(), options, |i, scratch| {
        crate::trace::any_hit(world, &sight.query(i), scratch)
    });
    SightMatrix::of(sight, hits)
}

/// The sight matrix through a scene (the world and its entities, none
/// passed over): pair `i` is `!`[`PlacedScene::any_hit`] of its ray.
pub fn sight_matrix_in_scene(
    scene: &PlacedScene,
    sight: &Sight,
    options: &BatchOptions,
) -> SightMatrix {
    let hits = crate::trace::run_batch(sight.pairs(), options, |i, scratch| {
        scene.any_hit(&sight.query(i), ENTITY_NONE, scratch)
    });
    SightMatrix::of(sight, hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_bits() {
        let m = SightMatrix {
            eyes: 2,
            targets: 5,
            visible: vec![
                true, false, false, true, true, //
                false, false, false, false, true,
            ],
        };
        assert_eq!(m.rows(), ["10011", "00001"]);
        assert_eq!(m.packed(), [0b0001_1001, 0b10]);
    }

    #[test]
    fn limits() {
        let eyes = vec![Vec3::ZERO; 1025];
        assert!(matches!(
            Sight::new(eyes.clone(), Some(vec![Vec3::ONE; 1024]), 1),
            Err(BotsError::TooManyPairs { pairs, .. }) if pairs == 1025 * 1024
        ));
        assert!(Sight::new(eyes.clone(), Some(vec![Vec3::ONE; 1023]), 1).is_ok());
        let mut far = eyes;
        far[7].x = f32::NAN;
        assert!(matches!(
            Sight::new(far, Some(Vec::new()), 1),
            Err(BotsError::BadPoint {
                field: "eyes",
                index: 7,
                ..
            })
        ));
    }
}
