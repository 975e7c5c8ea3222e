//! Quake 3 content and surface flag values (the flags a brush or surface carries, and the masks traces take).

pub const CONTENTS_SOLID: u32 = 0x1;
pub const CONTENTS_LAVA: u32 = 0x8;
pub const CONTENTS_SLIME: u32 = 0x10;
pub const CONTENTS_WATER: u32 = 0x20;
pub const CONTENTS_FOG: u32 = 0x40;
pub const CONTENTS_PLAYERCLIP: u32 = 0x10000;
pub const CONTENTS_MONSTERCLIP: u32 = 0x20000;
pub const CONTENTS_BOTCLIP: u32 = 0x40_0000;
pub const CONTENTS_BODY: u32 = 0x200_0000;
pub const CONTENTS_CORPSE: u32 = 0x400_0000;
pub const CONTENTS_DETAIL: u32 = 0x800_0000;
pub const CONTENTS_TRIGGER: u32 = 0x4000_0000;
pub const CONTENTS_NODROP: u32 = 0x8000_0000;

pub const MASK_SOLID: u32 = CONTENTS_SOLID;
pub const MASK_PLAYERSOLID: u32 = CONTENTS_SOLID | CONTENTS_PLAYERCLIP | CONTENTS_BODY;
pub const MASK_SHOT: u32 = CONTENTS_SOLID | CONTENTS_BODY | CONTENTS_CORPSE;
pub const MASK_WATER: u32 = CONTENTS_WATER | CONTENTS_LAVA | CONTENTS_SLIME;
pub const MASK_OPAQUE: u32 = CONTENTS_SOLID | CONTENTS_SLIME | CONTENTS_LAVA;

pub const SURF_SLICK: u32 = 0x2;
pub const SURF_SKY: u32 = 0x4;
pub const SURF_LADDER: u32 = 0x8;
pub const SURF_NOIMPACT: u32 = 0x10;
pub const SURF_NOMARKS: u32 = 0x20;
pub const SURF_NONSOLID: u32 = 0x4000;
