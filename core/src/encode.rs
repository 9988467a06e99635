//! The compact binary kernel encoding.
//!
//! Layout: the 8 magic bytes `SIMFAKRN`, a little-endian `u16` format
//! version, then the [`Kernel`] in postcard. Decoding treats its input as
//! hostile: every failure is a [`DecodeError`], and a decoded kernel is
//! validated before it is returned.

use crate::error::DecodeError;
use crate::kernel::Kernel;

/// The magic bytes that open every binary kernel.
pub const MAGIC: [u8; 8] = *b"SIMFAKRN";
/// The format version this build writes and reads.
pub const VERSION: u16 = 5;
/// Bytes of the header (magic + version).
pub const HEADER_LEN: usize = MAGIC.len() + 2;

/// True when `bytes` start with the binary kernel magic.
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

/// Encodes `kernel` into `buf`, returning the used prefix.
pub fn encode<'b>(kernel: &Kernel, buf: &'b mut [u8]) -> Result<&'b mut [u8], DecodeError> {
    if buf.len() < HEADER_LEN {
        return Err(DecodeError::BufferFull);
    }
    buf[..MAGIC.len()].copy_from_slice(&MAGIC);
    buf[MAGIC.len()..HEADER_LEN].copy_from_slice(&VERSION.to_le_bytes());
    let body = postcard::to_slice(kernel, &mut buf[HEADER_LEN..])
        .map_err(|_| DecodeError::BufferFull)?
        .len();
    Ok(&mut buf[..HEADER_LEN + body])
}

/// Decodes and validates a binary kernel.
pub fn decode(bytes: &[u8]) -> Result<Kernel, DecodeError> {
    if bytes.len() < HEADER_LEN {
        if !MAGIC.starts_with(bytes) {
            return Err(DecodeError::BadMagic);
        }
        return Err(DecodeError::Truncated);
    }
    if !is_binary(bytes) {
        return Err(DecodeError::BadMagic);
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != VERSION {
        return Err(DecodeError::BadVersion {
            found: version,
            reads: VERSION,
        });
    }
    let (kernel, rest): (Kernel, &[u8]) =
        postcard::take_from_bytes(&bytes[HEADER_LEN..]).map_err(|_| DecodeError::Malformed)?;
    if !rest.is_empty() {
        return Err(DecodeError::TrailingBytes);
    }
    kernel.validate().map_err(DecodeError::Invalid)?;
    Ok(kernel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::KernelError;
    use crate::isa::{Expr, Instr, Ref};
    use crate::kernel::{MbarDecl, Role};
    use crate::tensor_map::TensorMap;

    fn sample() -> Kernel {
        let mut k = Kernel {
            name: "sample".try_into().unwrap(),
            grid: [4, 2, 1],
            smem_bytes: 1024,
            ..Kernel::default()
        };
        k.maps
            .push(TensorMap {
                name: "A".try_into().unwrap(),
                base: 0x1000,
                elem_bytes: 2,
                rank: 2,
                dims: [1024, 1024, 0, 0, 0],
                strides: [2, 2048, 0, 0, 0],
                boxdim: [64, 128, 0, 0, 0],
            })
            .unwrap();
        k.mbarriers
            .push(MbarDecl {
                name: "full".try_into().unwrap(),
                len: 2,
                count: 1,
            })
            .unwrap();
        let mut e = Expr::constant(0);
        e.c[0] = 64;
        k.exprs.push(Expr::constant(0)).unwrap();
        k.exprs.push(e).unwrap();
        let bar = Ref { decl: 0, idx: 0 };
        for i in [
            Instr::MbarExpectTx { bar, bytes: 16384 },
            Instr::TmaLoad {
                map: 0,
                bar,
                coords: [1, 0, 0, 0, 0],
                multicast: 0,
            },
            Instr::MbarArrive { bar },
            Instr::MbarWait { bar, parity: 0 },
            Instr::Wgmma {
                n: 128,
                mode: crate::isa::WgmmaMode::Ss,
            },
            Instr::Wgmma {
                n: 64,
                mode: crate::isa::WgmmaMode::Rs,
            },
            Instr::WgmmaCommit,
            Instr::WgmmaWait { n: 0 },
            Instr::Compute {
                work: crate::isa::Work {
                    fp32: 22528,
                    mufu: 11264,
                    fp16: 11264,
                    int: u32::MAX,
                },
            },
            Instr::Exit,
        ] {
            k.code.push(i).unwrap();
        }
        k.roles
            .push(Role {
                name: "main".try_into().unwrap(),
                count: 1,
                regs: 128,
                start: 0,
                len: 10,
                stream: false,
            })
            .unwrap();
        k.validate().unwrap();
        k
    }

    fn bytes(k: &Kernel) -> Vec<u8> {
        let mut buf = [0u8; 8192];
        encode(k, &mut buf).unwrap().to_vec()
    }

    #[test]
    fn round_trips_exactly() {
        let k = sample();
        let b = bytes(&k);
        assert!(is_binary(&b));
        let k2 = decode(&b).unwrap();
        assert_eq!(k2, k);
        assert_eq!(bytes(&k2), b);
    }

    #[test]
    fn every_truncation_is_a_typed_error() {
        let b = bytes(&sample());
        for n in 0..b.len() {
            let e = decode(&b[..n]).unwrap_err();
            assert!(
                matches!(
                    e,
                    DecodeError::Truncated | DecodeError::Malformed | DecodeError::BadMagic
                ),
                "prefix {n}: {e:?}"
            );
        }
    }

    /// The `decode_binary` fuzz target's find: a grid whose three sides
    /// multiply past `u64` overflowed in `Kernel::ctas` before validation
    /// could reject it.
    #[test]
    fn a_grid_past_u64_is_a_bad_grid_not_a_panic() {
        let mut k = sample();
        k.grid = [u32::MAX; 3];
        assert_eq!(k.ctas(), u64::MAX);
        assert_eq!(k.validate(), Err(KernelError::BadGrid));
        let b = bytes(&k);
        assert_eq!(decode(&b), Err(DecodeError::Invalid(KernelError::BadGrid)));
        // The fuzzer's own input, byte for byte.
        let found: [u8; 114] = [
            83, 73, 77, 70, 65, 75, 82, 78, 3, 0, 4, 114, 105, 110, 103, 169, 255, 255, 255, 4, 45,
            251, 255, 255, 255, 1, 0, 128, 32, 2, 8, 112, 121, 2, 1, 5, 8, 0, 0, 1, 0, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 2, 0, 128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 4, 4, 15, 17, 0, 5, 9, 0,
            1, 7, 0, 1, 128, 4, 0, 0, 2, 0, 0, 7, 19,
        ];
        assert!(decode(&found).is_err());
    }

    #[test]
    fn header_errors() {
        let mut b = bytes(&sample());
        assert_eq!(decode(b"SIMF"), Err(DecodeError::Truncated));
        assert_eq!(decode(b"XY"), Err(DecodeError::BadMagic));
        b[9] = 7;
        assert_eq!(
            decode(&b),
            Err(DecodeError::BadVersion {
                found: 0x0700 | VERSION,
                reads: VERSION
            })
        );
        b[0] = b'X';
        assert_eq!(decode(&b), Err(DecodeError::BadMagic));
        let mut t = bytes(&sample());
        t.push(0);
        assert_eq!(decode(&t), Err(DecodeError::TrailingBytes));
    }

    #[test]
    fn unknown_instruction_tag_is_malformed() {
        let k = sample();
        let b = bytes(&k);
        // The code table is the kernel's last field and its last instruction
        // is `Exit`, a unit variant encoded as its one-byte tag: replace that
        // tag with one no instruction has.
        let mut bad = b.clone();
        *bad.last_mut().unwrap() = 0x7f;
        assert_eq!(decode(&bad), Err(DecodeError::Malformed));
    }

    #[test]
    fn out_of_range_ids_and_absurd_counts_are_rejected() {
        let mut k = sample();
        k.code[1] = Instr::TmaLoad {
            map: 5,
            bar: Ref { decl: 0, idx: 0 },
            coords: [1, 0, 0, 0, 0],
            multicast: 0,
        };
        assert_eq!(
            decode(&bytes(&k)),
            Err(DecodeError::Invalid(KernelError::BadTensorMap { at: 1 }))
        );
        let mut k = sample();
        k.code[2] = Instr::MbarArrive {
            bar: Ref { decl: 3, idx: 0 },
        };
        assert_eq!(
            decode(&bytes(&k)),
            Err(DecodeError::Invalid(KernelError::BadMbarrier { at: 2 }))
        );
        let mut k = sample();
        k.code[3] = Instr::MbarWait {
            bar: Ref { decl: 0, idx: 0 },
            parity: 99,
        };
        assert_eq!(
            decode(&bytes(&k)),
            Err(DecodeError::Invalid(KernelError::BadExpr { at: 3 }))
        );
        // A code table claiming 2^32 instructions: a varint count far above capacity.
        let good = bytes(&sample());
        let mut absurd = good[..HEADER_LEN].to_vec();
        absurd.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(matches!(decode(&absurd), Err(DecodeError::Malformed)));
        let mut k = sample();
        k.grid = [0, 1, 1];
        assert_eq!(
            decode(&bytes(&k)),
            Err(DecodeError::Invalid(KernelError::BadGrid))
        );
    }
}
