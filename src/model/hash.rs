//! A multiply-rotate hasher for the small integer keys of hot lookups
//! (instance ids, pids, type ids): SipHash showed up in profiles, and these
//! keys come from the program's own tables, not from an adversary.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

#[derive(Default, Clone, Copy)]
pub struct IntHasher(u64);

const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl std::hash::Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
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
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(K);
    }
    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64);
    }
}

pub type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;
pub type IntSet<K> = HashSet<K, BuildHasherDefault<IntHasher>>;
