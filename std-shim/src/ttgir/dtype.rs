//! Element types as scope strings name them, and as MLIR spells them.

use std::fmt;

/// The element type of an operand or accumulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// IEEE half precision (`f16`).
    Fp16,
    /// bfloat16 (`bf16`).
    Bf16,
    /// 8-bit float, 4 exponent bits (`f8E4M3FN` and its variants).
    Fp8E4M3,
    /// 8-bit float, 5 exponent bits (`f8E5M2` and its variants).
    Fp8E5M2,
    /// TensorFloat-32: `f32` operands of a WGMMA, which Hopper multiplies
    /// at TF32 precision.
    Tf32,
    /// IEEE single precision (`f32`).
    Fp32,
    /// IEEE double precision (`f64`).
    Fp64,
    /// 8-bit integer (`i8`).
    Int8,
    /// 16-bit integer (`i16`).
    Int16,
    /// 32-bit integer (`i32`).
    Int32,
    /// 64-bit integer (`i64`).
    Int64,
}

impl Dtype {
    /// Every element type, in the order of the grammar.
    pub const ALL: [Dtype; 11] = [
        Dtype::Fp16,
        Dtype::Bf16,
        Dtype::Fp8E4M3,
        Dtype::Fp8E5M2,
        Dtype::Tf32,
        Dtype::Fp32,
        Dtype::Fp64,
        Dtype::Int8,
        Dtype::Int16,
        Dtype::Int32,
        Dtype::Int64,
    ];

    /// The name in a scope string (`FP16`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Fp16 => "FP16",
            Dtype::Bf16 => "BF16",
            Dtype::Fp8E4M3 => "FP8E4M3",
            Dtype::Fp8E5M2 => "FP8E5M2",
            Dtype::Tf32 => "TF32",
            Dtype::Fp32 => "FP32",
            Dtype::Fp64 => "FP64",
            Dtype::Int8 => "INT8",
            Dtype::Int16 => "INT16",
            Dtype::Int32 => "INT32",
            Dtype::Int64 => "INT64",
        }
    }

    /// The element type a scope-string name stands for.
    pub fn from_name(name: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bytes per element in memory (TF32 occupies an `f32`).
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::Fp8E4M3 | Dtype::Fp8E5M2 | Dtype::Int8 => 1,
            Dtype::Fp16 | Dtype::Bf16 | Dtype::Int16 => 2,
            Dtype::Tf32 | Dtype::Fp32 | Dtype::Int32 => 4,
            Dtype::Fp64 | Dtype::Int64 => 8,
        }
    }

    /// The element type of an MLIR element type name (`f16`, `bf16`,
    /// `f8E4M3FN`, `f8E4M3FNUZ`, `f8E5M2`, `f8E5M2FNUZ`, `f32`, `f64`,
    /// `i8` ... `i64`); `f32` gives [`Dtype::Fp32`].
    pub fn from_mlir(elem: &str) -> Option<Dtype> {
        Some(match elem {
            "f16" => Dtype::Fp16,
            "bf16" => Dtype::Bf16,
            "f32" => Dtype::Fp32,
            "f64" => Dtype::Fp64,
            "i8" => Dtype::Int8,
            "i16" => Dtype::Int16,
            "i32" => Dtype::Int32,
            "i64" => Dtype::Int64,
            e if e.starts_with("f8E4M3") => Dtype::Fp8E4M3,
            e if e.starts_with("f8E5M2") => Dtype::Fp8E5M2,
            _ => return None,
        })
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mlir_element_types() {
        assert_eq!(Dtype::from_mlir("f8E4M3FN"), Some(Dtype::Fp8E4M3));
        assert_eq!(Dtype::from_mlir("f8E5M2FNUZ"), Some(Dtype::Fp8E5M2));
        assert_eq!(Dtype::from_mlir("bf16"), Some(Dtype::Bf16));
        assert_eq!(Dtype::from_mlir("i1"), None);
        for d in Dtype::ALL {
            assert_eq!(Dtype::from_name(d.name()), Some(d));
        }
    }
}
