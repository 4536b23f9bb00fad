//! A multiply-rotate hasher for the keys of hot lookups (instance ids,
//! pids, type ids, metric ids, a few names): SipHash showed up in profiles.
//! The keys come from input files, so `finish` folds the full 128-bit
//! product: every bit of the key reaches the low bits that pick a bucket.
//! Without it, keys that differ only in their high bits (PCP metric ids of
//! one item number in many clusters, instance ids in steps of 2^20, pids in
//! steps of 2^32) all landed in one bucket group and lookups went linear.
//! Unkeyed: a file crafted against this function can still slow a table
//! down; keyed SipHash costs more than these lookups are worth (issue 18).

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

#[derive(Default, Clone, Copy)]
pub struct IntHasher(u64);

const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
/// Odd, with its bits spread (the fractional digits of pi).
const K2: u64 = 0x24_3f_6a_88_85_a3_08_d3;

/// The low and high halves of the full product, xored: each bit of the
/// result depends on every bit of `x`.
#[inline]
fn fold(x: u64, k: u64) -> u64 {
    let p = (x as u128).wrapping_mul(k as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

impl std::hash::Hasher for IntHasher {
    fn finish(&self) -> u64 {
        fold(self.0, K2)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(5) ^ *b as u64).wrapping_mul(K);
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64);
    }
    fn write_i32(&mut self, i: i32) {
        self.write_u32(i as u32);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = fold(self.0.rotate_left(5) ^ i, K);
    }
    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64);
    }
}

pub type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;
pub type IntSet<K> = HashSet<K, BuildHasherDefault<IntHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, BuildHasherDefault};

    /// Keys that differ only in their high bits spread over the low bits
    /// (hashbrown's bucket index): with the plain product every one of
    /// these families had one value in its low 12 bits.
    #[test]
    fn high_bit_keys_reach_the_bucket_bits() {
        let b = BuildHasherDefault::<IntHasher>::default();
        let families: [&dyn Fn(u64) -> u64; 3] = [
            &|i| b.hash_one(i << 32),
            &|i| b.hash_one((i << 20) as u32),
            &|i| b.hash_one(((i as u32) << 10) as i32),
        ];
        for f in families {
            let mut low = std::collections::HashSet::new();
            for i in 0..4096 {
                low.insert(f(i) & 0xfff);
            }
            // 4,096 random values give about 2,590 distinct ones.
            assert!(low.len() > 2400, "{} distinct low 12 bits", low.len());
        }
    }
}
