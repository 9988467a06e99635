//! Shared helpers for simfa's end-to-end tests: a tiny programmatic kernel
//! builder and run helpers that record the event stream.
//!
//! The end-to-end tests may use every crate of the workspace; this crate
//! (`simfa-tests`) uses `simfa-core` and `simfa-std`, and the binary's own
//! end-to-end tests live beside it in `cli/tests/`.

use simfa_core::{
    Cycle, Event, Expr, GpuConfig, Instr, Kernel, Observer, Ref, SimError, Simulator, Summary,
    TensorMap,
};
use simfa_std::check::ConsistencyChecker;

/// Builds kernels instruction by instruction: the core's
/// [`simfa_core::builder::Builder`] with the shorthand the tests use (a
/// role runs until the next one starts; misuse panics, as a test should).
pub struct Builder {
    b: simfa_core::builder::Builder<Kernel>,
    /// `LoopBegin` indices of the open loops, innermost last.
    loops: Vec<u16>,
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
        let mut b = simfa_core::builder::Builder::new(Kernel::default(), name).unwrap();
        b.grid(grid);
        Builder {
            b,
            loops: Vec::new(),
        }
    }

    /// The kernel so far.
    pub fn kernel(&self) -> &Kernel {
        self.b.kernel()
    }

    /// Sets the shared memory per CTA.
    pub fn smem(&mut self, bytes: u32) {
        self.b.smem(bytes);
    }

    /// Declares a tensor map; returns its index.
    pub fn map(&mut self, m: TensorMap) -> u8 {
        self.b.map(m).unwrap()
    }

    /// Interns an expression.
    pub fn expr(&mut self, e: Expr) -> u16 {
        self.b.expr(e).unwrap()
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
        self.b.mbarriers(name, len, count).unwrap()
    }

    /// Declares a stage array.
    pub fn stage(&mut self, name: &str, len: u16, consumers: u16) -> u8 {
        self.b.stages(name, len, consumers).unwrap()
    }

    /// Declares a 1-D tensor map of `elems` elements of `elem` bytes with box `bx`.
    pub fn map1d(&mut self, name: &str, base: u64, elem: u8, elems: u64, bx: u32) -> u8 {
        self.map(TensorMap {
            name: name.try_into().unwrap(),
            base,
            elem_bytes: elem,
            rank: 1,
            dims: [elems, 0, 0, 0, 0],
            strides: [elem as u64, 0, 0, 0, 0],
            boxdim: [bx, 0, 0, 0, 0],
        })
    }

    fn close_role(&mut self) {
        let _ = self.b.end_role();
    }

    /// Starts a role's program (ending the previous role's).
    pub fn role(&mut self, name: &str, count: u8, regs: u16) {
        self.close_role();
        self.b.begin_role(name, count as u32, regs as u32).unwrap();
    }

    /// Declares a role whose instructions come from a stream source.
    pub fn stream_role(&mut self, name: &str, count: u8, regs: u16) {
        self.close_role();
        self.b.stream_role(name, count as u32, regs as u32).unwrap();
    }

    /// Appends an instruction to the current role.
    pub fn op(&mut self, i: Instr) {
        self.b.op(i).unwrap();
    }

    /// Opens a loop with a trip-count expression.
    pub fn begin_loop(&mut self, count: u16) {
        let e = self.kernel().exprs[count as usize];
        let at = self.b.loop_begin(e).unwrap();
        self.loops.push(at);
    }

    /// Closes the innermost loop.
    pub fn end_loop(&mut self) {
        let begin = self.loops.pop().expect("an open loop");
        self.b.loop_end(begin).unwrap();
    }

    /// A reference to element `idx` (an expression id) of declaration `decl`.
    pub fn at(&self, decl: u8, idx: u16) -> Ref {
        Ref { decl, idx }
    }

    /// The validated kernel.
    pub fn finish(mut self) -> Kernel {
        self.close_role();
        self.b.finish().unwrap()
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
