//! Arbitrary bytes as a TTGIR kernel, interpreted and lowered for two CTAs
//! with a small step budget: streams or an error naming the input, never a
//! panic or a hang. Every argument of the first function gets a value: a
//! 4096 x 4096 tensor for a descriptor or a pointer, 64 for an integer.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use simfa_std::ttgir::launch::{Launch, Tensor};
use simfa_std::ttgir::lower::Program;
use simfa_std::ttgir::tree::parse;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = simfa_std::ttgir::decode("fuzz.ttgir", data) else {
        return;
    };
    let Ok(module) = parse("fuzz.ttgir", text) else {
        return;
    };
    let Some(f) = module.funcs.first() else {
        return;
    };
    let mut args = BTreeMap::new();
    let mut tensors = BTreeMap::new();
    for (i, (_, ty)) in f.args.iter().enumerate() {
        if ty.starts_with("!tt.tensordesc") || ty.starts_with("!tt.ptr") {
            let wide = ty.contains("f32") || ty.contains("i32");
            let t = Tensor {
                base: 0x1000_0000 * (i as u64 + 1),
                elem: if wide { 4 } else { 2 },
                dims: vec![4096, 4096],
                strides: Vec::new(),
                // Integer tables get contents, so loaded sizes steer the
                // mutated kernels too.
                values: if ty.contains("ptr<i") {
                    vec![64; 16]
                } else {
                    Vec::new()
                },
            };
            tensors.insert(format!("arg{i}"), t);
        } else if simfa_std::ttgir::value::int_bits(ty).is_some() {
            args.insert(format!("arg{i}"), 64);
        }
    }
    let launch = Launch {
        kernel: Some(f.name.to_string()),
        grid: [2, 1, 1],
        regs: None,
        smem: None,
        max_steps: Some(10_000),
        args,
        tensors,
        buffers: Default::default(),
    };
    if let Ok(p) = Program::new(&module, &launch, "fuzz.toml") {
        for cta in 0..2 {
            for role in 0..p.roles() as u8 {
                let _ = p.streams(cta, role);
            }
        }
    }
});
