//! Tests of [`super`] (tags.rs).

use super::*;
use proptest::prelude::*;

fn buf(sets: usize, ways: usize) -> Vec<u8> {
    let mut l = Layout::new();
    TagArray::layout(sets, ways, &mut l).unwrap();
    vec![0u8; l.bytes()]
}

/// Reference: per set, resident lines most recent first.
struct Model {
    sets: Vec<Vec<Evicted>>,
    ways: usize,
}

impl Model {
    fn new(sets: usize, ways: usize) -> Self {
        Model {
            sets: vec![Vec::new(); sets],
            ways,
        }
    }
    fn set(&mut self, line: u64) -> &mut Vec<Evicted> {
        let n = self.sets.len() as u64;
        &mut self.sets[(line % n) as usize]
    }
    fn pos(&mut self, line: u64) -> Option<usize> {
        self.set(line).iter().position(|e| e.line == line)
    }
    fn touch(&mut self, line: u64) -> bool {
        match self.pos(line) {
            Some(p) => {
                let e = self.set(line).remove(p);
                self.set(line).insert(0, e);
                true
            }
            None => false,
        }
    }
    fn insert(&mut self, line: u64, dirty: bool, kind: u8) -> Option<Evicted> {
        let kind = kind.min(KINDS as u8 - 1);
        if let Some(p) = self.pos(line) {
            let mut e = self.set(line).remove(p);
            e.dirty |= dirty;
            e.kind = kind;
            self.set(line).insert(0, e);
            return None;
        }
        let ways = self.ways;
        let s = self.set(line);
        let out = if s.len() == ways { s.pop() } else { None };
        s.insert(0, Evicted { line, dirty, kind });
        out
    }
    fn invalidate(&mut self, line: u64) -> Option<Evicted> {
        let p = self.pos(line)?;
        Some(self.set(line).remove(p))
    }
    fn get(&mut self, line: u64) -> Option<Evicted> {
        let p = self.pos(line)?;
        Some(self.set(line)[p])
    }
    fn occupancy(&self) -> [u32; KINDS] {
        let mut o = [0; KINDS];
        for e in self.sets.iter().flatten() {
            o[e.kind as usize] += 1;
        }
        o
    }
}

#[test]
fn geometry_errors_and_layout() {
    let mut l = Layout::new();
    assert!(matches!(
        TagArray::layout(0, 4, &mut l),
        Err(BuildError::Config(ConfigError { field: "sets", .. }))
    ));
    assert!(matches!(
        TagArray::layout(4, 0, &mut l),
        Err(BuildError::Config(ConfigError { field: "ways", .. }))
    ));
    assert_eq!(
        TagArray::layout(usize::MAX, 2, &mut l),
        Err(BuildError::TooLarge)
    );
    let mut l = Layout::new();
    TagArray::layout(5, 3, &mut l).unwrap();
    for start in 0..8 {
        let mut b = vec![0u8; l.bytes() + 8];
        let mut a = Arena::new(&mut b[start..start + l.bytes()]);
        let t = TagArray::new_in(&mut a, 5, 3, Capacity::Arena).unwrap();
        assert_eq!((t.sets(), t.ways(), t.capacity()), (5, 3, 15));
    }
    let mut b = [0u8; 16];
    let mut a = Arena::new(&mut b);
    assert!(matches!(
        TagArray::new_in(&mut a, 5, 3, Capacity::Arena),
        Err(BuildError::ArenaTooSmall { .. })
    ));
}

#[test]
fn lru_eviction_and_state() {
    let mut b = buf(2, 2);
    let mut a = Arena::new(&mut b);
    let mut t = TagArray::new_in(&mut a, 2, 2, Capacity::Arena).unwrap();
    assert_eq!(t.set_of(7), 1);
    assert_eq!(t.insert(0, false, 0), None);
    assert_eq!(t.insert(2, true, 1), None);
    assert_eq!(t.lookup(0), Some(0));
    assert_eq!(t.lookup(2), Some(1));
    assert_eq!(t.occupancy(), [1, 1, 0, 0]);
    // 0 is LRU; a lookup does not change that, a touch does.
    assert_eq!(
        t.victim(4),
        Some(Evicted {
            line: 0,
            dirty: false,
            kind: 0
        })
    );
    assert!(t.touch(0));
    assert_eq!(
        t.victim(4),
        Some(Evicted {
            line: 2,
            dirty: true,
            kind: 1
        })
    );
    assert_eq!(
        t.insert(4, false, 9),
        Some(Evicted {
            line: 2,
            dirty: true,
            kind: 1
        })
    );
    assert_eq!(
        t.state(4),
        Some(LineState {
            way: 1,
            dirty: false,
            kind: 3
        })
    );
    assert_eq!(t.occupancy_of(200), 1);
    assert!(t.mark_dirty(0));
    assert!(!t.mark_dirty(2));
    assert!(t.set_kind(0, 2));
    assert_eq!(
        t.invalidate(0),
        Some(Evicted {
            line: 0,
            dirty: true,
            kind: 2
        })
    );
    assert_eq!(t.invalidate(0), None);
    assert_eq!(t.valid_lines(), 1);
    assert_eq!(t.victim(6), None); // a free way
    assert_eq!(t.insert(6, false, 0), None);
    assert_eq!(t.lookup(6), Some(0));
    assert!(t.clean(6));
    t.clear();
    assert_eq!(t.valid_lines(), 0);
    assert_eq!(t.lookup(4), None);
}

#[test]
fn renumbering_keeps_lru_order() {
    let mut b = buf(1, 4);
    let mut a = Arena::new(&mut b);
    let mut t = TagArray::new_in(&mut a, 1, 4, Capacity::Arena).unwrap();
    let mut m = Model::new(1, 4);
    t.clocks[0] = u32::MAX - 5;
    for line in [1u64, 2, 3, 4, 2, 1, 5, 3, 6, 1, 7, 8, 2, 9] {
        assert_eq!(t.touch(line), m.touch(line));
        assert_eq!(t.insert(line, false, 0), m.insert(line, false, 0));
    }
    assert!(t.clocks[0] < 100);
}

#[derive(Clone, Debug)]
enum Op {
    Touch(u64),
    Insert(u64, bool, u8),
    Access(u64, bool),
    Invalidate(u64),
    MarkDirty(u64),
    SetKind(u64, u8),
    Lookup(u64),
}

/// Line numbers below `lines` whose top bytes (the lookup fingerprints)
/// differ for some and collide for others.
fn line(lines: u64) -> impl Strategy<Value = u64> {
    (0..lines).prop_map(|l| l ^ ((l % 3) << 56))
}

fn op(lines: u64) -> impl Strategy<Value = Op> {
    let l = || line(lines);
    prop_oneof![
        2 => l().prop_map(Op::Touch),
        3 => (l(), any::<bool>(), 0u8..6).prop_map(|(l, d, k)| Op::Insert(l, d, k)),
        6 => (l(), any::<bool>()).prop_map(|(l, w)| Op::Access(l, w)),
        1 => l().prop_map(Op::Invalidate),
        1 => l().prop_map(Op::MarkDirty),
        1 => (l(), 0u8..5).prop_map(|(l, k)| Op::SetKind(l, k)),
        1 => l().prop_map(Op::Lookup),
    ]
}

fn case() -> impl Strategy<Value = (usize, usize, u32, Vec<Op>)> {
    (
        1usize..6,
        // Past 8 ways the lookup compares fingerprints a word at a time.
        prop_oneof![1usize..6, 7usize..20],
        prop_oneof![Just(0u32), Just(u32::MAX - 40)],
    )
        .prop_flat_map(|(sets, ways, clock)| {
            let lines = (sets * ways * 3) as u64;
            (
                Just(sets),
                Just(ways),
                Just(clock),
                proptest::collection::vec(op(lines), 0..400),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn byte_matches_flags_every_match(word: u64, byte: u8) {
        let m = byte_matches(word, byte);
        let bytes = word.to_le_bytes();
        for (i, &b) in bytes.iter().enumerate() {
            if b == byte {
                prop_assert!(m & (0x80 << (8 * i)) != 0);
            }
        }
        prop_assert_eq!(m == 0, !bytes.contains(&byte));
        prop_assert_eq!(m & !0x8080_8080_8080_8080, 0);
    }

    #[test]
    fn matches_reference_lru((sets, ways, clock, ops) in case()) {
        let mut b = buf(sets, ways);
        let mut a = Arena::new(&mut b);
        let mut t = TagArray::new_in(&mut a, sets, ways, Capacity::Arena).unwrap();
        t.clocks.fill(clock);
        let mut m = Model::new(sets, ways);
        let (mut hits, mut misses, mut evictions) = (0u32, 0u32, 0u32);
        for op in ops {
            match op {
                Op::Touch(l) => prop_assert_eq!(t.touch(l), m.touch(l)),
                Op::Insert(l, d, k) => prop_assert_eq!(t.insert(l, d, k), m.insert(l, d, k)),
                Op::Access(l, w) if l % 2 == 0 => {
                    // The one-pass access against the model's two steps.
                    let got = t.access(l, w, 1);
                    let hit = m.touch(l);
                    let evicted = if hit {
                        hits += 1;
                        if w {
                            m.set(l).first_mut().unwrap().dirty = true;
                        }
                        None
                    } else {
                        misses += 1;
                        m.insert(l, w, 1)
                    };
                    evictions += evicted.is_some() as u32;
                    prop_assert_eq!(got, Access { hit, evicted });
                }
                Op::Access(l, w) => {
                    // The usual cache access: hit -> touch, miss -> fill.
                    let hit = t.touch(l);
                    prop_assert_eq!(hit, m.touch(l));
                    if hit {
                        hits += 1;
                        if w {
                            prop_assert!(t.mark_dirty(l));
                            m.set(l).first_mut().unwrap().dirty = true;
                        }
                    } else {
                        misses += 1;
                        let e = t.insert(l, w, 0);
                        prop_assert_eq!(e, m.insert(l, w, 0));
                        evictions += e.is_some() as u32;
                    }
                }
                Op::Invalidate(l) => prop_assert_eq!(t.invalidate(l), m.invalidate(l)),
                Op::MarkDirty(l) => {
                    let want = m.pos(l).map(|p| m.set(l)[p].dirty = true).is_some();
                    prop_assert_eq!(t.mark_dirty(l), want);
                }
                Op::SetKind(l, k) => {
                    let k2 = k.min(KINDS as u8 - 1);
                    let want = m.pos(l).map(|p| m.set(l)[p].kind = k2).is_some();
                    prop_assert_eq!(t.set_kind(l, k), want);
                }
                Op::Lookup(l) => {
                    let s = t.state(l);
                    prop_assert_eq!(t.lookup(l), s.map(|s| s.way));
                    let r = m.get(l);
                    prop_assert_eq!(s.map(|s| (s.dirty, s.kind)), r.map(|e| (e.dirty, e.kind)));
                }
            }
            prop_assert_eq!(t.occupancy(), m.occupancy());
        }
        // Final contents agree line by line.
        for l in 0..(sets * ways * 3) as u64 {
            let r = m.get(l);
            prop_assert_eq!(t.state(l).map(|s| (s.dirty, s.kind)), r.map(|e| (e.dirty, e.kind)));
        }
        prop_assert!(evictions <= misses);
        let _ = hits;
    }
}
