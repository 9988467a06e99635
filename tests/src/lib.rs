//! Shared helpers for simfa's end-to-end tests: a tiny programmatic kernel
//! builder and run helpers that record the event stream.

use simfa_core::isa::MAX_LOOP_DEPTH;
use simfa_core::{
    Cycle, Event, Expr, GpuConfig, Instr, Kernel, MbarDecl, Observer, Ref, Role, SimError,
    Simulator, StageDecl, Summary, TensorMap,
};
use simfa_std::check::ConsistencyChecker;

/// Builds kernels instruction by instruction.
#[derive(Default)]
pub struct Builder {
    /// The kernel under construction.
    pub k: Kernel,
    open: Vec<usize>,
}

/// A variable term of an expression.
#[derive(Clone, Copy)]
pub enum Var {
    /// Loop counter at depth i.
    L(usize),
    /// WarpGroup index within role.
    Wg,
    /// CTA coordinate x.
    Cx,
    /// CTA coordinate y.
    Cy,
    /// Linear CTA index.
    Cta,
}

impl Builder {
    /// A kernel with a grid.
    pub fn new(name: &str, grid: [u32; 3]) -> Self {
        let mut b = Builder::default();
        b.k.name = name.try_into().unwrap();
        b.k.grid = grid;
        b
    }

    /// Interns an expression.
    pub fn expr(&mut self, e: Expr) -> u16 {
        if let Some(i) = self.k.exprs.iter().position(|x| *x == e) {
            return i as u16;
        }
        self.k.exprs.push(e).unwrap();
        (self.k.exprs.len() - 1) as u16
    }

    /// A constant expression.
    pub fn c(&mut self, v: i64) -> u16 {
        self.expr(Expr::constant(v))
    }

    /// `k + sum(coef * var)`, then `div` and `rem` (0 for none).
    pub fn lin(&mut self, k: i64, terms: &[(i64, Var)], div: i64, rem: i64) -> u16 {
        let mut e = Expr::constant(k);
        for &(c, v) in terms {
            match v {
                Var::L(i) => e.l[i] += c,
                Var::Wg => e.wg += c,
                Var::Cx => e.c[0] += c,
                Var::Cy => e.c[1] += c,
                Var::Cta => e.cta += c,
            }
        }
        e.div = div;
        e.rem = rem;
        self.expr(e)
    }

    /// Declares an mbarrier array; returns its declaration index.
    pub fn mbarrier(&mut self, name: &str, len: u16, count: u16) -> u8 {
        self.k
            .mbarriers
            .push(MbarDecl {
                name: name.try_into().unwrap(),
                len,
                count,
            })
            .unwrap();
        (self.k.mbarriers.len() - 1) as u8
    }

    /// Declares a stage array.
    pub fn stage(&mut self, name: &str, len: u16, consumers: u16) -> u8 {
        self.k
            .stages
            .push(StageDecl {
                name: name.try_into().unwrap(),
                len,
                consumers,
            })
            .unwrap();
        (self.k.stages.len() - 1) as u8
    }

    /// Declares a 1-D tensor map of `elems` elements of `elem` bytes with box `bx`.
    pub fn map1d(&mut self, name: &str, base: u64, elem: u8, elems: u64, bx: u32) -> u8 {
        self.k
            .maps
            .push(TensorMap {
                name: name.try_into().unwrap(),
                base,
                elem_bytes: elem,
                rank: 1,
                dims: [elems, 0, 0, 0, 0],
                strides: [elem as u64, 0, 0, 0, 0],
                boxdim: [bx, 0, 0, 0, 0],
            })
            .unwrap();
        (self.k.maps.len() - 1) as u8
    }

    /// Starts a role's program.
    pub fn role(&mut self, name: &str, count: u8, regs: u16) {
        let start = self.k.code.len() as u16;
        self.k
            .roles
            .push(Role {
                name: name.try_into().unwrap(),
                count,
                regs,
                start,
                len: 0,
                stream: false,
            })
            .unwrap();
    }

    /// Appends an instruction to the current role.
    pub fn op(&mut self, i: Instr) {
        self.k.code.push(i).unwrap();
        let r = self.k.roles.last_mut().unwrap();
        r.len = self.k.code.len() as u16 - r.start;
    }

    /// Opens a loop with a trip-count expression.
    pub fn begin_loop(&mut self, count: u16) {
        assert!(self.open.len() < MAX_LOOP_DEPTH);
        self.open.push(self.k.code.len());
        self.op(Instr::LoopBegin { count, end: 0 });
    }

    /// Closes the innermost loop.
    pub fn end_loop(&mut self) {
        let b = self.open.pop().unwrap();
        let end = self.k.code.len() as u16;
        if let Instr::LoopBegin { count, .. } = self.k.code[b] {
            self.k.code[b] = Instr::LoopBegin { count, end };
        }
        self.op(Instr::LoopEnd { begin: b as u16 });
    }

    /// A reference to element `idx` (an expression id) of declaration `decl`.
    pub fn at(&self, decl: u8, idx: u16) -> Ref {
        Ref { decl, idx }
    }

    /// The validated kernel.
    pub fn finish(self) -> Kernel {
        assert!(self.open.is_empty());
        self.k.validate().unwrap();
        self.k
    }
}

/// Records every event with its cycle.
#[derive(Default)]
pub struct Recorder {
    /// The events.
    pub events: Vec<(u64, Event)>,
}

impl Observer for Recorder {
    fn on_event(&mut self, cycle: Cycle, event: &Event) {
        self.events.push((cycle.get(), *event));
    }
}

/// Runs a kernel to completion with a fresh arena, checking read-after-transfer
/// consistency (panics with the checker's summary if it finds a violation).
pub fn run(cfg: &GpuConfig, k: &Kernel) -> Result<Summary, SimError> {
    run_observed(cfg, k, &mut ())
}

/// Runs a kernel to completion with an observer, paired with a
/// [`ConsistencyChecker`] that must stay clean (panics otherwise).
pub fn run_observed(
    cfg: &GpuConfig,
    k: &Kernel,
    obs: &mut impl Observer,
) -> Result<Summary, SimError> {
    let (result, check) = run_checked(cfg, k, obs);
    assert_clean(&check);
    result
}

/// Runs a kernel to completion with an observer and a fresh
/// [`ConsistencyChecker`], returning both (for tests that expect violations).
pub fn run_checked(
    cfg: &GpuConfig,
    k: &Kernel,
    obs: &mut impl Observer,
) -> (Result<Summary, SimError>, ConsistencyChecker) {
    let n = Simulator::<simfa_core::NoStream>::arena_size(cfg, k).unwrap();
    let mut arena = vec![0u8; n];
    let mut sim = Simulator::new(cfg, k, &mut arena).unwrap();
    let mut pair = (obs, ConsistencyChecker::new(cfg));
    let result = sim.run(&mut pair);
    (result, pair.1)
}

/// Panics with the checker's summary unless it found nothing.
pub fn assert_clean(check: &ConsistencyChecker) {
    assert!(check.is_clean(), "{}", check.summary());
}
