//! Per-operation issue and landing cycles of a kernel on both hierarchy
//! models, for comparing them (a calibration aid): `opprobe FILE [GPU]
//! [N]` lists the first N operations; `WORST=1` lists the N slowest under
//! the transaction-level model instead.
use simfa_core::config::MemoryModel;
use simfa_core::{Cycle, Event, GpuConfig, NoStream, Observer, Simulator};
use std::collections::HashMap;

#[derive(Default)]
struct Ops(HashMap<u32, (u64, u64, u64)>);
impl Observer for Ops {
    fn on_event(&mut self, c: Cycle, e: &Event) {
        match *e {
            Event::TmaIssue { op, bytes, .. } => {
                self.0.insert(op, (c.get(), 0, bytes));
            }
            Event::TmaDone { op, .. } => {
                if let Some(x) = self.0.get_mut(&op) {
                    x.1 = c.get();
                }
            }
            _ => {}
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let k = simfa_std::load::load_kernel(std::path::Path::new(&args[0])).unwrap();
    let mut res = Vec::new();
    for m in [MemoryModel::Line, MemoryModel::Transaction] {
        let mut cfg = GpuConfig::preset(args.get(1).map_or("h800", |s| s.as_str())).unwrap();
        cfg.memory = m;
        let mut arena = vec![0u8; Simulator::<NoStream>::arena_size(&cfg, &k).unwrap()];
        let mut sim = Simulator::new(&cfg, &k, &mut arena).unwrap();
        let mut o = Ops::default();
        let s = sim.run(&mut o).unwrap();
        println!(
            "{m}: {} cycles {:?}",
            s.cycles,
            s.memory
                .map(|x| (x.dram_reads, x.l2_hits, x.coalesced, x.dram_row_hits))
        );
        if let Some(x) = s.memory {
            println!(
                "  merged {} shadow hits {} MSHR stalls {}",
                x.mshr_merged, x.shadow_hits, x.mshr_stalls
            );
        }
        res.push(o.0);
    }
    let mut ids: Vec<_> = res[0].keys().copied().collect();
    ids.sort();
    if std::env::var_os("WORST").is_some() {
        ids.sort_by_key(|id| {
            std::cmp::Reverse(res[1].get(id).map_or(0, |b| b.1.saturating_sub(b.0)))
        });
    }
    let (mut sa, mut sb) = (0u64, 0u64);
    for id in &ids {
        sa += res[0][id].1 - res[0][id].0;
        sb += res[1].get(id).map_or(0, |b| b.1.saturating_sub(b.0));
    }
    println!(
        "mean latency line {} txn {}",
        sa / ids.len() as u64,
        sb / ids.len() as u64
    );
    for id in ids
        .iter()
        .take(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(40))
    {
        let a = res[0][id];
        let b = res[1].get(id).copied().unwrap_or_default();
        println!(
            "op {id}: line issue {} lat {} | txn issue {} lat {}",
            a.0,
            a.1 - a.0,
            b.0,
            b.1.saturating_sub(b.0)
        );
    }
}
