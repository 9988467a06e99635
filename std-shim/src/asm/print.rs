//! The printer: canonical text that [`super::parse`] reads back.

use core::fmt::Write as _;

use simfa_core::isa::ExprId;
use simfa_core::{CtaOrder, Expr, Instr, Kernel, Ref, UnitClass, WgmmaMode};

use super::expr::write_expr;

/// Appends a comma-separated list.
fn list<T: core::fmt::Display>(out: &mut String, items: &[T]) {
    out.push('[');
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{x}");
    }
    out.push(']');
}

/// Appends expression `id`, or a marker that does not parse when it is out of range.
fn expr(out: &mut String, k: &Kernel, id: ExprId) {
    match k.exprs.get(id as usize) {
        Some(e) => write_expr(out, e),
        None => {
            let _ = write!(out, "?expr{id}");
        }
    }
}

/// Appends `NAME` (element 0) or `NAME[EXPR]`.
fn decl_ref(out: &mut String, k: &Kernel, r: Ref, stage: bool) {
    let name = if stage {
        k.stages.get(r.decl as usize).map(|d| d.name.as_str())
    } else {
        k.mbarriers.get(r.decl as usize).map(|d| d.name.as_str())
    };
    match name {
        Some(n) => out.push_str(n),
        None => {
            let _ = write!(out, "?decl{}", r.decl);
        }
    }
    if k.exprs.get(r.idx as usize) != Some(&Expr::constant(0)) {
        out.push('[');
        expr(out, k, r.idx);
        out.push(']');
    }
}

/// Appends `MAP, ` for a tensor map operand.
fn map_name(out: &mut String, k: &Kernel, map: u8) {
    match k.maps.get(map as usize) {
        Some(m) => out.push_str(&m.name),
        None => {
            let _ = write!(out, "?map{map}");
        }
    }
}

/// Appends `[c0, c1, ...]` with as many coordinates as the map's rank.
fn coords(out: &mut String, k: &Kernel, map: u8, c: &[ExprId; 5]) {
    let rank = k
        .maps
        .get(map as usize)
        .map_or(5, |m| (m.rank as usize).min(5));
    out.push('[');
    for (i, &id) in c[..rank].iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        expr(out, k, id);
    }
    out.push(']');
}

/// Appends `, WORD=DIMS` for a non-zero cluster dimension mask.
fn dims(out: &mut String, word: &str, mask: u8) {
    if mask != 0 {
        let _ = write!(out, ", {word}=");
        for (bit, c) in [(1, 'x'), (2, 'y'), (4, 'z')] {
            if mask & bit != 0 {
                out.push(c);
            }
        }
    }
}

/// Appends one instruction, without indentation or newline.
fn instr(out: &mut String, k: &Kernel, ins: &Instr) {
    match *ins {
        Instr::TmaLoad {
            map,
            bar,
            coords: c,
            multicast,
        } => {
            out.push_str("tma.load ");
            map_name(out, k, map);
            out.push_str(", ");
            decl_ref(out, k, bar, false);
            out.push_str(", ");
            coords(out, k, map, &c);
            dims(out, "multicast", multicast);
        }
        Instr::TmaStore { map, coords: c } => {
            out.push_str("tma.store ");
            map_name(out, k, map);
            out.push_str(", ");
            coords(out, k, map, &c);
        }
        Instr::StGlobal {
            map,
            coords: c,
            segment,
        } => {
            out.push_str("st.global ");
            map_name(out, k, map);
            out.push_str(", ");
            coords(out, k, map, &c);
            let _ = write!(out, ", {segment}");
        }
        Instr::LdGlobal {
            map,
            bar,
            coords: c,
            segment,
            l1,
        } => {
            out.push_str(if l1 { "ld.global.ca " } else { "ld.global " });
            map_name(out, k, map);
            out.push_str(", ");
            decl_ref(out, k, bar, false);
            out.push_str(", ");
            coords(out, k, map, &c);
            let _ = write!(out, ", {segment}");
        }
        Instr::BulkLoad { bar, addr, bytes } => {
            out.push_str("bulk.load ");
            decl_ref(out, k, bar, false);
            out.push_str(", ");
            expr(out, k, addr);
            let _ = write!(out, ", {bytes}");
        }
        Instr::BulkStore { addr, bytes } => {
            out.push_str("bulk.store ");
            expr(out, k, addr);
            let _ = write!(out, ", {bytes}");
        }
        Instr::StoreWait { n } => {
            let _ = write!(out, "store.wait {n}");
        }
        Instr::MbarInit { bar, count } => {
            out.push_str("mbar.init ");
            decl_ref(out, k, bar, false);
            let _ = write!(out, ", {count}");
        }
        Instr::MbarArrive { bar } => {
            out.push_str("mbar.arrive ");
            decl_ref(out, k, bar, false);
        }
        Instr::MbarExpectTx { bar, bytes } => {
            out.push_str("mbar.expect_tx ");
            decl_ref(out, k, bar, false);
            let _ = write!(out, ", {bytes}");
        }
        Instr::MbarWait { bar, parity } => {
            out.push_str("mbar.wait ");
            decl_ref(out, k, bar, false);
            out.push_str(", ");
            expr(out, k, parity);
        }
        Instr::LockAcquire { lock } => {
            out.push_str("lock.acquire ");
            expr(out, k, lock);
        }
        Instr::LockRelease { lock } => {
            out.push_str("lock.release ");
            expr(out, k, lock);
        }
        Instr::CounterAdd { counter, amount: n } | Instr::CounterWait { counter, count: n } => {
            out.push_str(if matches!(ins, Instr::CounterAdd { .. }) {
                "counter.add "
            } else {
                "counter.wait "
            });
            expr(out, k, counter);
            out.push_str(", ");
            expr(out, k, n);
        }
        Instr::StageAcquire { stage } => {
            out.push_str("stage.acquire ");
            decl_ref(out, k, stage, true);
        }
        Instr::StageRelease { stage, cluster } => {
            out.push_str("stage.release ");
            decl_ref(out, k, stage, true);
            dims(out, "cluster", cluster);
        }
        Instr::Wgmma { n, mode } => {
            let _ = write!(out, "wgmma {n}");
            if mode == WgmmaMode::Rs {
                out.push_str(" rs");
            }
        }
        Instr::WgmmaCommit => out.push_str("wgmma.commit"),
        Instr::WgmmaWait { n } => {
            let _ = write!(out, "wgmma.wait {n}");
        }
        Instr::BarSync { id, threads } | Instr::BarArrive { id, threads } => {
            let op = if matches!(ins, Instr::BarSync { .. }) {
                "bar.sync"
            } else {
                "bar.arrive"
            };
            let _ = write!(out, "{op} ");
            expr(out, k, id);
            let _ = write!(out, ", {threads}");
        }
        Instr::Bubble { cycles } => {
            let _ = write!(out, "bubble {cycles}");
        }
        Instr::SmemMove { bytes } => {
            let _ = write!(out, "smem.move {bytes}");
        }
        Instr::Compute { work } => {
            out.push_str("compute");
            let mut any = false;
            for c in UnitClass::ALL {
                let ops = work.get(c);
                if ops != 0 {
                    let _ = write!(out, " {}={ops}", c.name());
                    any = true;
                }
            }
            if !any {
                out.push_str(" fp32=0");
            }
        }
        Instr::LoopBegin { count, .. } => {
            out.push_str("loop ");
            expr(out, k, count);
            out.push_str(" {");
        }
        Instr::LoopEnd { .. } => out.push('}'),
        Instr::Exit => out.push_str("exit"),
    }
}

/// Writes `k` as canonical text.
pub(super) fn print_kernel(k: &Kernel) -> String {
    let mut out = String::new();
    let [x, y, z] = k.grid;
    let _ = writeln!(out, "kernel {}", k.name);
    let _ = writeln!(out, "grid {x} {y} {z}");
    if k.cluster.is_clustered() {
        let [x, y, z] = k.cluster.dims;
        let _ = writeln!(out, "cluster {x} {y} {z}");
    }
    match k.order {
        CtaOrder::Linear => out.push_str("order linear\n"),
        CtaOrder::Grouped { rows } => {
            let _ = writeln!(out, "order grouped {rows}");
        }
    }
    let _ = writeln!(out, "smem {}", k.smem_bytes);
    if !(k.maps.is_empty() && k.mbarriers.is_empty() && k.stages.is_empty()) {
        out.push('\n');
    }
    for m in &k.maps {
        let r = (m.rank as usize).min(5);
        let _ = write!(
            out,
            "tensormap {} base={:#x} elem={} dims=",
            m.name, m.base, m.elem_bytes
        );
        list(&mut out, &m.dims[..r]);
        out.push_str(" strides=");
        list(&mut out, &m.strides[1.min(r)..r]);
        out.push_str(" box=");
        list(&mut out, &m.boxdim[..r]);
        out.push('\n');
    }
    let arrays = k
        .mbarriers
        .iter()
        .map(|d| ("mbarrier", &d.name, d.len, "count", d.count))
        .chain(
            k.stages
                .iter()
                .map(|d| ("stage", &d.name, d.len, "consumers", d.consumers)),
        );
    for (what, name, len, field, n) in arrays {
        let _ = write!(out, "{what} {name}");
        if len != 1 {
            let _ = write!(out, "[{len}]");
        }
        let _ = writeln!(out, " {field}={n}");
    }
    for r in &k.roles {
        let _ = write!(out, "\nrole {} count={} regs={}", r.name, r.count, r.regs);
        if r.stream {
            out.push_str(" stream\n");
            continue;
        }
        out.push_str(" {\n");
        let start = (r.start as usize).min(k.code.len());
        let end = (start + r.len as usize).min(k.code.len());
        let mut depth = 1usize;
        for ins in &k.code[start..end] {
            if matches!(ins, Instr::LoopEnd { .. }) {
                depth = depth.saturating_sub(1).max(1);
            }
            for _ in 0..depth {
                out.push_str("    ");
            }
            instr(&mut out, k, ins);
            out.push('\n');
            if matches!(ins, Instr::LoopBegin { .. }) {
                depth += 1;
            }
        }
        out.push_str("}\n");
    }
    out
}
