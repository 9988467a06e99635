//! Tests of [`super`] (lines.rs).

use super::*;
use ::std::collections::BTreeSet;
use proptest::prelude::*;

fn map(rank: u8, elem: u8, dims: [u64; 5], strides: [u64; 5], boxdim: [u32; 5]) -> TensorMap {
    TensorMap {
        name: "t".try_into().unwrap(),
        base: 0,
        elem_bytes: elem,
        rank,
        dims,
        strides,
        boxdim,
    }
}

fn set_storage(capacity: usize) -> Vec<u8> {
    let mut l = Layout::new();
    DedupSet::layout(capacity, &mut l).unwrap();
    vec![0u8; l.bytes()]
}

/// Brute force: every in-bounds element, every byte of it. Returns the
/// set of line addresses, the sum over rows of each row's distinct lines
/// and the in-bounds bytes.
fn reference(m: &TensorMap, c: &[i64; 5], line: u64) -> (BTreeSet<u64>, u64, u64) {
    let r = m.rank as usize;
    let mut set = BTreeSet::new();
    let mut per_row = 0u64;
    let mut bytes = 0u64;
    let total: u64 = m.boxdim[1..r].iter().map(|&b| b as u64).product();
    for row in 0..total {
        let mut x = [0i64; 5];
        let mut rest = row;
        let mut inside = true;
        for d in 1..r {
            x[d] = c[d] + (rest % m.boxdim[d] as u64) as i64;
            rest /= m.boxdim[d] as u64;
            inside &= x[d] >= 0 && (x[d] as u64) < m.dims[d];
        }
        if !inside {
            continue;
        }
        let mut row_lines = BTreeSet::new();
        for i0 in 0..m.boxdim[0] as i64 {
            let x0 = c[0] + i0;
            if x0 < 0 || x0 as u64 >= m.dims[0] {
                continue;
            }
            let e = m.elem_bytes as u64;
            let a =
                m.base + x0 as u64 * e + (1..r).map(|d| x[d] as u64 * m.strides[d]).sum::<u64>();
            for b in a..a + e {
                row_lines.insert(b / line * line);
            }
            bytes += e;
        }
        per_row += row_lines.len() as u64;
        set.extend(row_lines);
    }
    (set, per_row, bytes)
}

fn small_map() -> impl Strategy<Value = TensorMap> {
    (1u8..=5, prop_oneof![Just(1u8), Just(2), Just(4), Just(8)]).prop_flat_map(|(rank, elem)| {
        let stride = prop_oneof![
            3 => (1u64..=24).prop_map(|k| 16 * k),
            1 => 0u64..300,
            1 => Just(0u64),
        ];
        (
            proptest::array::uniform5(1u64..=7),
            proptest::array::uniform5(stride),
            proptest::array::uniform5(1u32..=5),
            (0u64..64).prop_map(|b| b * 16),
            0u64..40,
            any::<bool>(),
        )
            .prop_map(move |(dims, mut strides, boxdim, base, odd, realistic)| {
                if realistic {
                    // A dense row-major tensor, strides = sizes below.
                    let mut s = dims[0] * elem as u64;
                    for d in 1..5 {
                        strides[d] = s.div_ceil(16) * 16;
                        s = strides[d] * dims[d];
                    }
                }
                let mut m = map(rank, elem, dims, strides, boxdim);
                m.base = base + odd * (!realistic) as u64;
                m
            })
    })
}

fn coords() -> impl Strategy<Value = [i64; 5]> {
    proptest::array::uniform5(-6i64..=9)
}

fn line_size() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1u64), Just(4), Just(16), Just(32), Just(64), Just(128)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn matches_brute_force(m in small_map(), c in coords(), line in line_size()) {
        let (want, per_row, bytes) = reference(&m, &c, line);

        // Dedup disabled: every row's lines.
        let mut all = Vec::new();
        let n = for_each_line(&m, &c, line, None, |a| all.push(a)).unwrap();
        prop_assert_eq!(n as usize, all.len());
        prop_assert_eq!(n, per_row);
        prop_assert!(all.len() >= want.len());
        prop_assert_eq!(all.iter().copied().collect::<BTreeSet<_>>(), want.clone());
        prop_assert!(all.iter().all(|a| a % line == 0));

        // Dedup: each line once, in first-occurrence order of the above.
        let bound = max_box_lines(&m, line).unwrap() as usize;
        prop_assert!(want.len() <= bound);
        let mut buf = set_storage(bound);
        let mut a = Arena::new(&mut buf);
        let mut set = DedupSet::new_in(&mut a, bound, Capacity::MemoryPort).unwrap();
        set.insert(12345).unwrap(); // stale content of an earlier box
        let mut uniq = Vec::new();
        let n = for_each_line(&m, &c, line, Some(&mut set), |a| uniq.push(a)).unwrap();
        prop_assert_eq!(n as usize, uniq.len());
        prop_assert_eq!(uniq.len(), want.len());
        let mut seen = BTreeSet::new();
        let first: Vec<u64> = all.iter().copied().filter(|a| seen.insert(*a)).collect();
        prop_assert_eq!(&uniq, &first);
        prop_assert_eq!(count_lines(&m, &c, line, Some(&mut set)).unwrap(), n);
        prop_assert_eq!(count_lines(&m, &c, line, None).unwrap(), per_row);

        // Bytes agree with the brute force and with the tensor map.
        let g = LineGen::new(&m, &c, line).unwrap();
        prop_assert_eq!(g.bytes(), bytes);
        prop_assert_eq!(m.box_bytes(&c), bytes);
        // The generator itself, driven line by line.
        let mut g2 = g;
        set.clear();
        let mut by_hand = Vec::new();
        while let Some(a) = g2.next_line(Some(&mut set)).unwrap() {
            by_hand.push(a);
        }
        prop_assert_eq!(&by_hand, &uniq);
        // The set path gives the same answer when forced on any box.
        let mut g3 = g;
        g3.sorted = false;
        set.clear();
        let mut hashed = Vec::new();
        while let Some(a) = g3.next_unique(&mut set).unwrap() {
            hashed.push(a);
        }
        prop_assert_eq!(hashed, uniq);
        prop_assert_eq!(g2.next_line(None).unwrap(), None);
        prop_assert_eq!(g.collect::<Vec<_>>(), all);
    }

    #[test]
    fn bulk_lines(addr in 0u64..10_000, bytes in 0u64..2_000, line in line_size()) {
        let mut got = Vec::new();
        let n = for_each_bulk_line(addr, bytes, line, |a| got.push(a)).unwrap();
        let want: Vec<u64> = (addr..addr + bytes)
            .map(|b| b / line * line)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        prop_assert_eq!(n as usize, got.len());
        prop_assert_eq!(got, want);
    }
}

#[test]
fn fully_clipped_box_has_no_lines() {
    let m = map(2, 2, [64, 64, 1, 1, 1], [0, 128, 0, 0, 0], [64, 8, 1, 1, 1]);
    for c in [
        [-64, 0, 0, 0, 0],
        [64, 0, 0, 0, 0],
        [0, -8, 0, 0, 0],
        [0, 64, 0, 0, 0],
        [0, 0, 3, 0, 0],
    ] {
        // (the third coordinate is ignored at rank 2: 8 rows of 128 bytes)
        let mut calls = 0;
        let n = for_each_line(&m, &c, 128, None, |_| calls += 1).unwrap();
        let want = if c[2] == 3 { 8 } else { 0 };
        assert_eq!((n, calls), (want, want), "{c:?}");
    }
    let mut huge = m.clone();
    huge.base = u64::MAX - 15; // no traffic, so no overflow either
    let g = LineGen::new(&huge, &[0, 64, 0, 0, 0], 128).unwrap();
    assert_eq!((g.total_rows(), g.bytes()), (0, 0));
    assert_eq!(g.count(), 0);
    assert_eq!(huge.box_bytes(&[0, 64, 0, 0, 0]), 0);
}

#[test]
fn partial_clip_and_typical_tile() {
    // A 64x128 fp16 tile of a 1000x1000 row-major matrix: 128 rows of
    // 128 bytes, each one line when aligned.
    let m = map(
        2,
        2,
        [1000, 1000, 1, 1, 1],
        [0, 2000 * 16 / 16, 0, 0, 0],
        [64, 128, 1, 1, 1],
    );
    let g = LineGen::new(&m, &[0, 0, 0, 0, 0], 128).unwrap();
    assert!(!g.needs_dedup());
    assert_eq!(g.total_rows(), 128);
    // Rows at 2000-byte stride are not 128-aligned: most straddle 2 lines.
    let n = count_lines(&m, &[0, 0, 0, 0, 0], 128, None).unwrap();
    assert!(n > 128 && n <= 256, "{n}");
    // Clipped at the right edge: x in 960..1000 (40 elements = 80 bytes).
    let g = LineGen::new(&m, &[960, 990, 0, 0, 0], 128).unwrap();
    assert_eq!((g.total_rows(), g.row_bytes()), (10, 80));
    assert_eq!(g.bytes(), m.box_bytes(&[960, 990, 0, 0, 0]));
}

#[test]
fn overlapping_rows_need_the_set() {
    // Stride 16 with 64-byte rows: rows overlap, lines repeat.
    let m = map(2, 4, [16, 16, 1, 1, 1], [0, 16, 0, 0, 0], [16, 16, 1, 1, 1]);
    let g = LineGen::new(&m, &[0; 5], 32).unwrap();
    assert!(g.needs_dedup());
    // Row y covers bytes 16y..16y+64: 2 lines for even y, 3 for odd y;
    // the box covers bytes 0..304, lines 0..=9.
    assert_eq!(count_lines(&m, &[0; 5], 32, None), Ok(8 * 2 + 8 * 3));
    let mut buf = set_storage(10);
    let mut a = Arena::new(&mut buf);
    let mut set = DedupSet::new_in(&mut a, 10, Capacity::MemoryPort).unwrap();
    let mut got = Vec::new();
    assert_eq!(
        for_each_line(&m, &[0; 5], 32, Some(&mut set), |a| got.push(a)),
        Ok(10)
    );
    got.sort_unstable();
    assert_eq!(got, (0..10).map(|l| l * 32).collect::<Vec<u64>>());
}

#[test]
fn dedup_full_is_an_error() {
    // Zero stride: every row is the same 4 lines, and rank 3 with a
    // growing stride makes 16 distinct lines in an unsorted walk.
    let m = map(3, 4, [32, 4, 4, 1, 1], [0, 0, 128, 0, 0], [32, 4, 4, 1, 1]);
    let g = LineGen::new(&m, &[0; 5], 32).unwrap();
    assert!(g.needs_dedup());
    let mut buf = set_storage(15);
    let mut a = Arena::new(&mut buf);
    let mut set = DedupSet::new_in(&mut a, 15, Capacity::MemoryPort).unwrap();
    let mut n = 0;
    let e = for_each_line(&m, &[0; 5], 32, Some(&mut set), |_| n += 1);
    assert_eq!(e, Err(LineError::DedupFull));
    assert_eq!(n, 15);
    // One more slot is enough, and the set can be reused.
    let mut buf = set_storage(16);
    let mut a = Arena::new(&mut buf);
    let mut set = DedupSet::new_in(&mut a, 16, Capacity::MemoryPort).unwrap();
    for _ in 0..3 {
        assert_eq!(count_lines(&m, &[0; 5], 32, Some(&mut set)), Ok(16));
    }
    assert_eq!(count_lines(&m, &[0; 5], 32, None), Ok(64));
    // Zero capacity with a box that needs the set.
    let mut buf = set_storage(0);
    let mut a = Arena::new(&mut buf);
    let mut set = DedupSet::new_in(&mut a, 0, Capacity::MemoryPort).unwrap();
    assert_eq!(
        count_lines(&m, &[0; 5], 32, Some(&mut set)),
        Err(LineError::DedupFull)
    );
}

#[test]
fn dedup_set_basics() {
    let mut buf = set_storage(3);
    let mut a = Arena::new(&mut buf);
    let mut s = DedupSet::new_in(&mut a, 3, Capacity::MemoryPort).unwrap();
    assert!(s.is_empty());
    assert_eq!(s.capacity(), 3);
    assert_eq!(s.insert(5), Ok(true));
    assert_eq!(s.insert(5), Ok(false));
    assert_eq!(s.insert(u64::MAX), Ok(true));
    assert_eq!(s.insert(u64::MAX), Ok(false));
    assert!(s.contains(u64::MAX) && s.contains(5) && !s.contains(6));
    assert_eq!(s.insert(0), Ok(true));
    assert_eq!(s.len(), 3);
    assert_eq!(s.insert(6), Err(Full(6)));
    assert_eq!(s.insert(0), Ok(false));
    s.clear();
    assert!(s.is_empty() && !s.contains(5) && !s.contains(u64::MAX) && !s.contains(0));
    assert_eq!(s.insert(6), Ok(true));
    let mut l = Layout::new();
    assert_eq!(
        DedupSet::layout(usize::MAX, &mut l),
        Err(BuildError::TooLarge)
    );
}

#[test]
fn hostile_maps_are_errors_not_panics() {
    let ok = map(2, 2, [64, 64, 1, 1, 1], [0, 128, 0, 0, 0], [64, 8, 1, 1, 1]);
    let c = [0i64; 5];
    for lb in [0u64, 3, 96] {
        assert_eq!(
            LineGen::new(&ok, &c, lb).err(),
            Some(LineError::BadLineSize)
        );
        assert_eq!(
            for_each_bulk_line(0, 1, lb, |_| {}),
            Err(LineError::BadLineSize)
        );
    }
    for (rank, elem) in [(0u8, 2u8), (6, 2), (255, 2), (2, 0)] {
        let mut m = ok.clone();
        m.rank = rank;
        m.elem_bytes = elem;
        assert_eq!(LineGen::new(&m, &c, 128).err(), Some(LineError::BadMap));
        assert_eq!(max_box_lines(&m, 128), None);
    }
    let mut m = ok.clone();
    m.base = u64::MAX - 100;
    assert_eq!(LineGen::new(&m, &c, 128).err(), Some(LineError::Overflow));
    let mut m = ok.clone();
    m.strides[1] = u64::MAX / 4;
    m.dims[1] = u64::MAX;
    assert_eq!(LineGen::new(&m, &c, 128).err(), Some(LineError::Overflow));
    assert_eq!(
        LineGen::new(&m, &[0, i64::MAX - 2, 0, 0, 0], 128).err(),
        Some(LineError::Overflow)
    );
    // Extreme coordinates and dimensions saturate instead of wrapping.
    let mut m = ok.clone();
    m.dims = [u64::MAX; 5];
    m.boxdim = [u32::MAX; 5];
    m.strides = [0, 16, 0, 0, 0];
    let g = LineGen::new(&m, &[0; 5], 128).unwrap();
    assert_eq!(
        (g.total_rows(), g.row_bytes()),
        (u32::MAX as u64, 2 * u32::MAX as u64)
    );
    assert!(g.needs_dedup());
    assert_eq!(
        LineGen::new(&m, &[i64::MAX, 0, 0, 0, 0], 128)
            .unwrap()
            .total_rows(),
        0
    );
    assert_eq!(
        LineGen::new(&m, &[i64::MAX - 9, 0, 0, 0, 0], 128).err(),
        Some(LineError::Overflow)
    );
    m.strides[1] = 1 << 40;
    assert_eq!(
        LineGen::new(&m, &[0; 5], 128).err(),
        Some(LineError::Overflow)
    );
    assert_eq!(
        LineGen::new(&m, &[i64::MIN, i64::MIN, 0, 0, 0], 128)
            .unwrap()
            .total_rows(),
        0
    );
    m.rank = 5;
    m.strides = [0, 16, 16, 16, 16];
    assert_eq!(
        LineGen::new(&m, &[0; 5], 128).err(),
        Some(LineError::Overflow)
    );
    // Bulk ranges.
    assert_eq!(for_each_bulk_line(u64::MAX, 1, 128, |_| {}), Ok(1));
    assert_eq!(
        for_each_bulk_line(u64::MAX, 2, 128, |_| {}),
        Err(LineError::Overflow)
    );
    assert_eq!(for_each_bulk_line(u64::MAX, 0, 128, |_| {}), Ok(0));
    let mut got = Vec::new();
    assert_eq!(
        for_each_bulk_line(u64::MAX - 1, 2, 1, |a| got.push(a)),
        Ok(2)
    );
    assert_eq!(got, vec![u64::MAX - 1, u64::MAX]);
    // Line size 1 reaching the last address of the space.
    let mut m = map(1, 1, [16, 1, 1, 1, 1], [0; 5], [16, 1, 1, 1, 1]);
    m.base = u64::MAX - 15;
    let mut buf = set_storage(16);
    let mut a = Arena::new(&mut buf);
    let mut set = DedupSet::new_in(&mut a, 16, Capacity::MemoryPort).unwrap();
    let mut last = 0;
    assert_eq!(
        for_each_line(&m, &c, 1, Some(&mut set), |a| last = a),
        Ok(16)
    );
    assert_eq!(last, u64::MAX);
    assert_eq!(max_box_lines(&ok, 128), Some(2 * 8));
}
