//! The values the TTGIR interpreter computes, and MLIR's integer
//! arithmetic on them, exact at every width.
//!
//! An integer of `bits` bits (1 for `i1`, 64 for `index`) is kept
//! sign-extended from its width in an `i64`, so a signed op reads it as
//! is and an unsigned op reads its low `bits` bits. Every result is
//! wrapped to its width, as MLIR's `arith` ops wrap.

/// A shared-memory buffer: the allocation (the byte offset of its
/// `local_alloc` in the file, the same in every iteration that runs it)
/// and the flattened index of the sub-buffer taken by `memdesc_index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemRef {
    /// The allocating op's byte offset.
    pub alloc: u32,
    /// The sub-buffer, flattened over the indices taken.
    pub index: i64,
}

/// The bit that marks a descriptor key as made in the kernel.
pub const MADE_DESC: u32 = 1 << 31;

/// One SSA value as the interpreter sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// An integer (or `i1`, or `index`).
    Int {
        /// The value, sign-extended from its width.
        v: i64,
        /// Its width in bits.
        bits: u8,
    },
    /// A tensor descriptor: a host one (the position of the kernel
    /// argument it was passed as) or one made in the kernel
    /// ([`MADE_DESC`] with the byte offset of its `tensormap_create`).
    Desc(u32),
    /// A pointer into the tensor the launch gives a pointer argument:
    /// the argument's position and a byte offset.
    Ptr {
        /// The argument's position.
        arg: u16,
        /// Bytes past the tensor's base.
        off: i64,
    },
    /// An integer or pointer tensor affine in its indices (addresses and
    /// offsets).
    Lin(super::affine::Lin),
    /// An `i1` tensor that holds on a box of indices (a load's mask).
    Mask(super::affine::Mask),
    /// An integer or pointer tensor made from indices loaded from memory:
    /// a gather's (or scatter's) offsets or addresses.
    Gather(super::affine::Gather),
    /// A tensor loaded into registers by load number `n` of the run: the
    /// first op that reads it waits for the load.
    Loaded(u64),
    /// A scalar read by a volatile load in the condition of the
    /// `scf.while` that spins on it: a flag's word at global address
    /// `addr`. Compared with a constant, it waits for the grid's counter
    /// of the word ([`super::interp::Interp`]).
    Polled {
        /// The word's global address.
        addr: u64,
    },
    /// A scalar integer loaded from memory (by load number `load`, from
    /// the tensor or buffer of pointer id `from`) whose contents the launch
    /// does not give, or integer math on one: the first op that reads it
    /// waits for the load, and a use that needs its value is an error. As
    /// an offset added to a pointer it is a gather's index
    /// ([`super::affine::Gather`]).
    Unknown {
        /// The load.
        load: u64,
        /// The pointer id it was loaded through.
        from: u16,
        /// The element's byte offset in it and its size in bytes.
        at: (i64, u8),
        /// `Some((scale, add))`: the value is `scale * loaded + add`;
        /// `None` after other math.
        linear: Option<(i64, i64)>,
    },
    /// An undefined integer (MLIR's poison): the result of a division by
    /// zero or an oversized shift at the op at this byte offset, and of
    /// integer ops on it. The GPU does not trap there (pipelined kernels
    /// compute a next tile past the last one and mask its loads off), so
    /// only a use that needs its value (a loop bound, a branch, a
    /// coordinate) is an error.
    Poison(u32),
    /// A global scratch buffer (the byte offset of its allocating op).
    Scratch(u32),
    /// A shared-memory buffer.
    Mem(MemRef),
    /// Anything whose value does not change the schedule: other tensors
    /// in registers, floats, other pointers.
    Opaque,
}

/// The width of integer type `ty` (`i1`, `i32`, `index`, ...), if it is one.
pub fn int_bits(ty: &str) -> Option<u8> {
    match ty.trim() {
        "index" => Some(64),
        t => {
            let b: u8 = t.strip_prefix('i')?.parse().ok()?;
            (1..=64).contains(&b).then_some(b)
        }
    }
}

/// `v` wrapped to `bits` bits and sign-extended.
pub fn wrap(v: i64, bits: u8) -> i64 {
    if bits >= 64 {
        v
    } else {
        let s = 64 - bits as u32;
        (v << s) >> s
    }
}

/// The low `bits` bits of `v`, as an unsigned number.
pub fn unsigned(v: i64, bits: u8) -> u64 {
    if bits >= 64 {
        v as u64
    } else {
        (v as u64) & ((1u64 << bits) - 1)
    }
}

/// What [`binary`] says of an op it does not know.
pub const NOT_INTEGER: &str = "not an integer op";

/// Integer ops of `arith` (and `tt.mulhiui`) on two operands of `bits` bits: the result, or
/// why there is none (division by zero, an oversized shift, an unknown op).
pub fn binary(op: &str, a: i64, b: i64, bits: u8) -> Result<i64, &'static str> {
    let (ua, ub) = (unsigned(a, bits), unsigned(b, bits));
    let zero = |d: u64| {
        if d == 0 {
            Err("division by zero")
        } else {
            Ok(())
        }
    };
    let r = match op {
        "addi" => a.wrapping_add(b),
        "subi" => a.wrapping_sub(b),
        "muli" => a.wrapping_mul(b),
        "mulhiui" => ((ua as u128 * ub as u128) >> bits.min(64)) as i64,
        "andi" => a & b,
        "ori" => a | b,
        "xori" => a ^ b,
        "maxsi" => a.max(b),
        "minsi" => a.min(b),
        "maxui" => ua.max(ub) as i64,
        "minui" => ua.min(ub) as i64,
        "divsi" => {
            zero(ub)?;
            a.wrapping_div(b)
        }
        "remsi" => {
            zero(ub)?;
            a.wrapping_rem(b)
        }
        "divui" => {
            zero(ub)?;
            (ua / ub) as i64
        }
        "remui" => {
            zero(ub)?;
            (ua % ub) as i64
        }
        "ceildivsi" => {
            zero(ub)?;
            let q = a.wrapping_div(b);
            if a.wrapping_rem(b) != 0 && ((a < 0) == (b < 0)) {
                q.wrapping_add(1)
            } else {
                q
            }
        }
        "floordivsi" => {
            zero(ub)?;
            let q = a.wrapping_div(b);
            if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
                q.wrapping_sub(1)
            } else {
                q
            }
        }
        "ceildivui" => {
            zero(ub)?;
            ua.div_ceil(ub) as i64
        }
        "shli" | "shrsi" | "shrui" => {
            if ub >= bits as u64 {
                return Err("a shift by the width or more");
            }
            match op {
                "shli" => a << ub,
                "shrsi" => a >> ub,
                _ => (ua >> ub) as i64,
            }
        }
        _ => return Err(NOT_INTEGER),
    };
    Ok(wrap(r, bits))
}

/// `arith.cmpi` with predicate `pred` on two operands of `bits` bits.
pub fn compare(pred: &str, a: i64, b: i64, bits: u8) -> Result<bool, &'static str> {
    let (ua, ub) = (unsigned(a, bits), unsigned(b, bits));
    Ok(match pred {
        "eq" => a == b,
        "ne" => a != b,
        "slt" => a < b,
        "sle" => a <= b,
        "sgt" => a > b,
        "sge" => a >= b,
        "ult" => ua < ub,
        "ule" => ua <= ub,
        "ugt" => ua > ub,
        "uge" => ua >= ub,
        _ => return Err("an unknown comparison predicate"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_wrap_and_sign_extend() {
        assert_eq!(int_bits("i32"), Some(32));
        assert_eq!(int_bits("index"), Some(64));
        assert_eq!(int_bits("i1"), Some(1));
        assert_eq!(int_bits("f32"), None);
        assert_eq!(int_bits("i0"), None);
        assert_eq!(wrap(0x8000_0000, 32), -0x8000_0000);
        assert_eq!(wrap(1, 1), -1);
        assert_eq!(unsigned(-1, 32), 0xffff_ffff);
        assert_eq!(binary("addi", i32::MAX as i64, 1, 32), Ok(i32::MIN as i64));
    }

    #[test]
    fn divisions_round_as_mlir_says() {
        assert_eq!(binary("divsi", -7, 2, 32), Ok(-3));
        assert_eq!(binary("remsi", -7, 2, 32), Ok(-1));
        assert_eq!(binary("ceildivsi", 7, 2, 32), Ok(4));
        assert_eq!(binary("ceildivsi", -7, 2, 32), Ok(-3));
        assert_eq!(binary("floordivsi", -7, 2, 32), Ok(-4));
        assert_eq!(binary("floordivsi", 7, 2, 32), Ok(3));
        assert_eq!(binary("divui", -2, 2, 32), Ok(0x7fff_ffff));
        assert_eq!(binary("remui", -1, 10, 32), Ok(5));
        assert_eq!(binary("ceildivui", 7, 2, 32), Ok(4));
        assert_eq!(binary("divsi", 1, 0, 32), Err("division by zero"));
        assert_eq!(binary("remui", 1, 0, 64), Err("division by zero"));
        assert_eq!(binary("minui", -1, 3, 32), Ok(3));
        // The high half of 0xffffffff * 6.
        assert_eq!(binary("mulhiui", -1, 6, 32), Ok(5));
        assert_eq!(binary("frob", 1, 1, 32), Err(NOT_INTEGER));
        assert_eq!(binary("maxsi", -1, 3, 32), Ok(3));
    }

    #[test]
    fn shifts_and_comparisons() {
        assert_eq!(binary("shli", 1, 31, 32), Ok(i32::MIN as i64));
        assert_eq!(binary("shrsi", -8, 1, 32), Ok(-4));
        assert_eq!(binary("shrui", -8, 28, 32), Ok(15));
        assert!(binary("shli", 1, 32, 32).is_err());
        assert_eq!(compare("slt", -1, 0, 32), Ok(true));
        assert_eq!(compare("ult", -1, 0, 32), Ok(false));
        assert_eq!(compare("uge", -1, 5, 32), Ok(true));
        assert!(compare("lt", 0, 0, 32).is_err());
    }
}
