//! A fixed-capacity hash map from `u64` keys to `Copy` values over arena
//! storage, for MSHRs and coalescer entries.
//!
//! Open addressing with linear probing and backward-shift deletion: there
//! are no tombstones, so lookups stay O(1) expected however many inserts and
//! removes a run performs. The slot count is a power of two at least twice
//! the capacity, so the load factor never exceeds 1/2 and every probe meets
//! an empty slot. The hash is a fixed Fibonacci multiply-shift
//! ([`fib_hash`]): the layout of the table, and so its iteration order, is a
//! pure function of the sequence of operations.

use core::fmt;

use crate::arena::{Arena, Layout};
use crate::error::{BuildError, Capacity};

/// The multiplier of the Fibonacci multiply-shift hash (`2^64 / φ`, odd).
pub const FIB: u64 = 0x9E37_79B9_7F4A_7C15;

/// Home slot of `key` in a table of `2^bits` slots, `1 <= bits <= 63`: the
/// top `bits` bits of `key * FIB`.
#[inline]
pub const fn fib_hash(key: u64, bits: u32) -> usize {
    (key.wrapping_mul(FIB) >> (64 - bits)) as usize
}

/// Slots of an open-addressing table holding up to `capacity` entries: the
/// smallest power of two that is at least `2 * capacity` and at least 2.
/// `None` when that does not fit in `usize`.
pub const fn slots_for(capacity: usize) -> Option<usize> {
    let Some(twice) = capacity.checked_mul(2) else {
        return None;
    };
    let twice = if twice < 2 { 2 } else { twice };
    twice.checked_next_power_of_two()
}

/// The error of an insertion into a full table: the value handed back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Full<V>(pub V);

impl<V> fmt::Display for Full<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("fixed-capacity table full")
    }
}

impl<V: fmt::Debug> core::error::Error for Full<V> {}

/// One occupied slot of a [`FixedMap`]. Storage for a map is a slice of
/// `Option<Slot<V>>`, `None` meaning empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Slot<V> {
    key: u64,
    val: V,
}

/// A fixed-capacity open-addressing map from `u64` keys to `V`.
#[derive(Debug)]
pub struct FixedMap<'a, V> {
    slots: &'a mut [Option<Slot<V>>],
    mask: usize,
    bits: u32,
    len: usize,
    cap: usize,
}

impl<'a, V: Copy> FixedMap<'a, V> {
    /// Accounts in `l` for the storage of a map of `capacity` entries
    /// ([`slots_for`] slots), exactly as [`FixedMap::new_in`] carves it.
    pub fn layout(capacity: usize, l: &mut Layout) -> Result<(), BuildError> {
        l.add::<Option<Slot<V>>>(slots_for(capacity).ok_or(BuildError::TooLarge)?)
    }

    /// Carves an empty map of `capacity` entries out of `arena`; `what`
    /// names the table in the error when the arena is exhausted.
    pub fn new_in(
        arena: &mut Arena<'a>,
        capacity: usize,
        what: Capacity,
    ) -> Result<Self, BuildError> {
        let n = slots_for(capacity).ok_or(BuildError::TooLarge)?;
        let slots = arena.alloc(n, None, what)?;
        Ok(Self::over(slots, capacity))
    }

    /// An empty map of `capacity` entries over the first
    /// [`slots_for`]`(capacity)` slots of `storage` (which it empties).
    /// `None` when `storage` is shorter than that.
    pub fn from_slots(storage: &'a mut [Option<Slot<V>>], capacity: usize) -> Option<Self> {
        let n = slots_for(capacity)?;
        let slots = storage.get_mut(..n)?;
        slots.fill(None);
        Some(Self::over(slots, capacity))
    }

    fn over(slots: &'a mut [Option<Slot<V>>], capacity: usize) -> Self {
        let n = slots.len();
        debug_assert!(n.is_power_of_two() && n >= 2 && n >= 2 * capacity);
        FixedMap {
            slots,
            mask: n - 1,
            bits: n.trailing_zeros(),
            len: 0,
            cap: capacity,
        }
    }

    /// Number of entries.
    #[inline]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// True when the map holds no entry.
    #[inline]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when an insertion of a new key would fail.
    #[inline]
    pub const fn is_full(&self) -> bool {
        self.len >= self.cap
    }

    /// Most entries the map holds.
    #[inline]
    pub const fn capacity(&self) -> usize {
        self.cap
    }

    /// `Ok(slot)` holding `key`, or `Err(slot)`: the empty slot that ends
    /// its probe sequence. Terminates because at least half the slots are
    /// empty.
    #[inline]
    fn find(&self, key: u64) -> Result<usize, usize> {
        let mut i = fib_hash(key, self.bits);
        loop {
            match &self.slots[i] {
                None => return Err(i),
                Some(s) if s.key == key => return Ok(i),
                Some(_) => i = (i + 1) & self.mask,
            }
        }
    }

    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: u64) -> Option<&V> {
        match self.find(key) {
            Ok(i) => self.slots[i].as_ref().map(|s| &s.val),
            Err(_) => None,
        }
    }

    /// The value of `key`, mutably.
    #[inline]
    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        match self.find(key) {
            Ok(i) => self.slots[i].as_mut().map(|s| &mut s.val),
            Err(_) => None,
        }
    }

    /// True when `key` has a value.
    #[inline]
    pub fn contains_key(&self, key: u64) -> bool {
        self.find(key).is_ok()
    }

    /// Sets the value of `key` and returns the one it replaces. A new key in
    /// a full map is refused and `val` handed back; replacing the value of a
    /// present key always succeeds.
    #[inline]
    pub fn insert(&mut self, key: u64, val: V) -> Result<Option<V>, Full<V>> {
        match self.find(key) {
            Ok(i) => {
                let s = self.slots[i].as_mut().map(|s| &mut s.val);
                Ok(s.map(|v| core::mem::replace(v, val)))
            }
            Err(i) => {
                if self.len >= self.cap {
                    return Err(Full(val));
                }
                self.slots[i] = Some(Slot { key, val });
                self.len += 1;
                Ok(None)
            }
        }
    }

    /// The value of `key`, inserting `val` first when `key` is absent (one
    /// probe). A new key in a full map is refused and `val` handed back.
    #[inline]
    pub fn get_or_insert(&mut self, key: u64, val: V) -> Result<&mut V, Full<V>> {
        let i = match self.find(key) {
            Ok(i) => i,
            Err(i) => {
                if self.len >= self.cap {
                    return Err(Full(val));
                }
                self.slots[i] = Some(Slot { key, val });
                self.len += 1;
                i
            }
        };
        match self.slots[i].as_mut() {
            Some(s) => Ok(&mut s.val),
            None => Err(Full(val)), // unreachable: slot `i` is occupied
        }
    }

    /// Removes `key` and returns its value. Backward-shift deletion: the
    /// entries after it in its cluster move back, so no tombstone remains.
    #[inline]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        let mut hole = self.find(key).ok()?;
        let out = self.slots[hole].take().map(|s| s.val);
        self.len -= 1;
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let Some(s) = self.slots[j] else { break };
            let home = fib_hash(s.key, self.bits);
            // The entry at `j` may fill the hole when the hole lies on its
            // probe path, i.e. between its home slot and `j` (cyclically).
            if (j.wrapping_sub(home) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.slots[hole] = Some(s);
                self.slots[j] = None;
                hole = j;
            }
        }
        out
    }

    /// Removes every entry. O(slots): not for hot paths.
    pub fn clear(&mut self) {
        self.slots.fill(None);
        self.len = 0;
    }

    /// Every `(key, value)` in slot order, which depends only on the
    /// sequence of operations. O(slots): not for hot paths.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        self.slots.iter().flatten().map(|s| (s.key, &s.val))
    }
}

impl<V: Copy + serde::Serialize + serde::de::DeserializeOwned> FixedMap<'_, V> {
    /// Writes the mutable state into a snapshot.
    pub(crate) fn save_state(
        &self,
        w: &mut crate::codec::Writer<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        w.val(&(self.len as u64))?;
        w.slice(self.slots)
    }

    /// Overwrites the mutable state from a snapshot.
    pub(crate) fn load_state(
        &mut self,
        r: &mut crate::codec::Reader<'_>,
    ) -> Result<(), crate::codec::SnapshotError> {
        self.len = r.at_most(self.cap, "map length")?;
        r.slice(self.slots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::std::collections::BTreeMap;
    use proptest::prelude::*;

    fn storage<V: Copy>(capacity: usize) -> Vec<Option<Slot<V>>> {
        vec![None; slots_for(capacity).unwrap()]
    }

    #[test]
    fn slot_counts() {
        assert_eq!(slots_for(0), Some(2));
        assert_eq!(slots_for(1), Some(2));
        assert_eq!(slots_for(2), Some(4));
        assert_eq!(slots_for(3), Some(8));
        assert_eq!(slots_for(64), Some(128));
        assert_eq!(slots_for(65), Some(256));
        assert_eq!(slots_for(usize::MAX), None);
        assert_eq!(slots_for(usize::MAX / 2 + 1), None);
    }

    #[test]
    fn layout_matches_arena() {
        for cap in [0usize, 1, 3, 17, 100] {
            let mut l = Layout::new();
            FixedMap::<u32>::layout(cap, &mut l).unwrap();
            for start in 0..8 {
                let mut buf = vec![0u8; l.bytes() + 8];
                let mut a = Arena::new(&mut buf[start..start + l.bytes()]);
                let mut m = FixedMap::<u32>::new_in(&mut a, cap, Capacity::MemoryPort).unwrap();
                assert_eq!(m.capacity(), cap);
                for k in 0..cap as u64 {
                    assert_eq!(m.insert(k * 977, k as u32), Ok(None));
                }
                assert_eq!(m.insert(u64::MAX, 7), Err(Full(7)));
            }
        }
        let mut buf = [0u8; 8];
        let mut a = Arena::new(&mut buf);
        assert!(matches!(
            FixedMap::<u64>::new_in(&mut a, 4, Capacity::MemoryPort),
            Err(BuildError::ArenaTooSmall {
                table: Capacity::MemoryPort,
                ..
            })
        ));
        let mut l = Layout::new();
        assert_eq!(
            FixedMap::<u8>::layout(usize::MAX, &mut l),
            Err(BuildError::TooLarge)
        );
    }

    #[test]
    fn basic_operations() {
        let mut st = storage::<u32>(3);
        st[0] = Some(Slot { key: 5, val: 5 }); // stale content is wiped
        let mut m = FixedMap::from_slots(&mut st, 3).unwrap();
        assert!(m.is_empty());
        assert_eq!(m.get(5), None);
        assert_eq!(m.insert(1, 10), Ok(None));
        assert_eq!(m.insert(2, 20), Ok(None));
        assert_eq!(m.insert(1, 11), Ok(Some(10)));
        *m.get_mut(2).unwrap() += 1;
        assert_eq!(m.get(2), Some(&21));
        assert_eq!(*m.get_or_insert(3, 30).unwrap(), 30);
        assert!(m.is_full());
        assert_eq!(m.insert(4, 40), Err(Full(40)));
        assert_eq!(m.get_or_insert(4, 41), Err(Full(41)));
        assert_eq!(m.insert(3, 31), Ok(Some(30)));
        *m.get_or_insert(3, 0).unwrap() += 1;
        assert_eq!(m.remove(3), Some(32));
        assert_eq!(m.remove(3), None);
        assert_eq!(m.insert(4, 40), Ok(None));
        let mut all: Vec<_> = m.iter().map(|(k, v)| (k, *v)).collect();
        all.sort();
        assert_eq!(all, vec![(1, 11), (2, 21), (4, 40)]);
        m.clear();
        assert!(m.is_empty() && m.get(1).is_none());
        let mut short = vec![None; 3];
        assert!(FixedMap::<u32>::from_slots(&mut short, 3).is_none());
    }

    #[test]
    fn zero_capacity_refuses_everything() {
        let mut st = storage::<u8>(0);
        let mut m = FixedMap::from_slots(&mut st, 0).unwrap();
        assert_eq!(m.insert(0, 1), Err(Full(1)));
        assert_eq!(m.get(0), None);
        assert_eq!(m.remove(0), None);
    }

    #[test]
    fn heavy_churn_keeps_probes_short() {
        // Many insert/remove cycles at full load on colliding keys: without
        // tombstones every lookup still terminates and finds its key.
        let cap = 64;
        let mut st = storage::<u64>(cap);
        let mut m = FixedMap::from_slots(&mut st, cap).unwrap();
        for round in 0..2_000u64 {
            for k in 0..cap as u64 {
                let key = (round * cap as u64 + k) << 20;
                m.insert(key, key).unwrap();
            }
            for k in 0..cap as u64 {
                let key = (round * cap as u64 + k) << 20;
                assert_eq!(m.remove(key), Some(key));
            }
            assert!(m.is_empty());
        }
        assert!(m.iter().next().is_none());
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u64, u32),
        GetOrInsert(u64, u32),
        Remove(u64),
        Get(u64),
        Bump(u64),
    }

    fn key() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..24,
            (0u64..24).prop_map(|k| k << 32),
            (0u64..24).prop_map(|k| u64::MAX - k),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (key(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            1 => (key(), any::<u32>()).prop_map(|(k, v)| Op::GetOrInsert(k, v)),
            3 => key().prop_map(Op::Remove),
            2 => key().prop_map(Op::Get),
            1 => key().prop_map(Op::Bump),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn matches_btreemap(cap in 0usize..20, ops in proptest::collection::vec(op(), 0..300)) {
            let mut st = storage::<u32>(cap);
            let mut m = FixedMap::from_slots(&mut st, cap).unwrap();
            let mut r: BTreeMap<u64, u32> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        let want = if r.contains_key(&k) || r.len() < cap {
                            Ok(r.insert(k, v))
                        } else {
                            Err(Full(v))
                        };
                        prop_assert_eq!(m.insert(k, v), want);
                    }
                    Op::GetOrInsert(k, v) => {
                        let got = m.get_or_insert(k, v).map(|x| *x);
                        let want = if r.contains_key(&k) || r.len() < cap {
                            Ok(*r.entry(k).or_insert(v))
                        } else {
                            Err(Full(v))
                        };
                        prop_assert_eq!(got, want);
                    }
                    Op::Remove(k) => prop_assert_eq!(m.remove(k), r.remove(&k)),
                    Op::Get(k) => {
                        prop_assert_eq!(m.get(k), r.get(&k));
                        prop_assert_eq!(m.contains_key(k), r.contains_key(&k));
                    }
                    Op::Bump(k) => {
                        if let Some(v) = m.get_mut(k) {
                            *v = v.wrapping_add(1);
                        }
                        if let Some(v) = r.get_mut(&k) {
                            *v = v.wrapping_add(1);
                        }
                    }
                }
                prop_assert_eq!(m.len(), r.len());
                prop_assert_eq!(m.is_full(), r.len() >= cap);
            }
            let mut all: Vec<(u64, u32)> = m.iter().map(|(k, v)| (k, *v)).collect();
            all.sort();
            prop_assert_eq!(all, r.into_iter().collect::<Vec<_>>());
        }
    }
}
