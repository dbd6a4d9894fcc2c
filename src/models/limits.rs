//! Upper bounds on a model configuration's sizes: a configuration beyond them (e.g. edited
//! checkpoint metadata) is refused before anything is built, so no size overflows or allocates.

use crate::{Error, Result};

/// The most resolution levels a U-Net may have.
pub const MAX_LEVELS: usize = 8;
/// The most blocks per level (U-Net) or in all (MLP).
pub const MAX_BLOCKS: usize = 64;
/// The widest a layer, an embedding or a class table may be.
pub const MAX_WIDTH: usize = 65_536;
/// The largest image side.
pub const MAX_IMAGE_SIDE: usize = 4096;

/// Errors, prefixed with `model` (e.g. "U-Net config"), naming the first `(setting, value,
/// most)` whose value exceeds its most.
pub fn check_sizes(model: &str, sizes: &[(&str, usize, usize)]) -> Result<()> {
    match sizes.iter().find(|(_, value, most)| value > most) {
        Some((setting, value, most)) => Err(Error::Config(format!(
            "{model}: {setting} {value} is beyond the largest supported, {most}; the configuration (or the \
             checkpoint metadata it came from) is damaged"
        ))),
        None => Ok(()),
    }
}
