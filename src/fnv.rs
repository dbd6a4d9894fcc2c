//! FNV-1a 64: a small, stable, non-cryptographic hash of byte streams, used to name weights in
//! cache keys and feature-network ids (the same bytes always give the same value).

/// The running FNV-1a 64 state: feed bytes with [`Fnv1a::eat`], read [`Fnv1a::value`].
#[derive(Clone, Copy, Debug)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    /// Mixes `bytes` into the hash.
    pub fn eat(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// The hash of everything eaten so far.
    pub fn value(&self) -> u64 {
        self.0
    }

    /// The hash of one byte string.
    pub fn of(bytes: &[u8]) -> u64 {
        let mut h = Fnv1a::default();
        h.eat(bytes);
        h.value()
    }
}
