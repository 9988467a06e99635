//! The streams of a [`Program`] as the simulator pulls them: each CTA's
//! role is interpreted as its WarpGroups pull, a few effects ahead of the
//! furthest one, and dropped when they have all reached its end.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;

use fnv::FnvHasher;

use simfa_core::source::SourceError;
use simfa_core::{Op, StreamSource};

use super::interp::{Effect, Interp, Origin, Role};
use super::lower::{LowerError, Program, RunState};

impl Program<'_, '_> {
    /// The WarpGroup streams of role `role` in CTA `cta`, whole.
    pub fn streams(&self, cta: u32, role: u8) -> Result<Vec<Vec<Op>>, LowerError> {
        let mut run = CtaRun::new(self, cta, role);
        while !run.done() {
            run.step()?;
        }
        Ok(run.queues.into_iter().map(Vec::from).collect())
    }
}

/// Effects a CTA's interpreter produces between two looks at its queues.
const EFFECTS_PER_STEP: usize = 64;

/// One CTA being interpreted: its suspended run and the ops lowered from
/// it that its WarpGroups have not pulled yet.
pub(super) struct CtaRun<'p, 'm, 'a> {
    program: &'p Program<'m, 'a>,
    coords: [u32; 3],
    role: u8,
    interp: Interp<'m, 'a>,
    effects: Vec<(Origin<'m>, Effect<'m>)>,
    pub(super) queues: Vec<VecDeque<Op>>,
    state: RunState,
    finished: bool,
}

impl<'p, 'm, 'a> CtaRun<'p, 'm, 'a> {
    pub(super) fn new(program: &'p Program<'m, 'a>, cta: u32, role: u8) -> Self {
        let coords = program.kernel.cta_coords(cta);
        let mut interp = Interp::new(program.module, coords, program.kernel.grid, program.budget)
            .with_global(program.global.clone())
            .as_role(Role::of(role));
        interp.start(program.func, &program.args);
        CtaRun {
            program,
            coords,
            role,
            interp,
            effects: Vec::new(),
            queues: vec![VecDeque::new(); program.wgs[role as usize] as usize],
            state: RunState::default(),
            finished: false,
        }
    }

    pub(super) fn done(&self) -> bool {
        self.finished
    }

    /// Interprets on until a few effects are out (or the run ends), and
    /// lowers them into the queues.
    pub(super) fn step(&mut self) -> Result<(), LowerError> {
        self.finished = self
            .interp
            .resume(&mut self.effects, &mut |e| e.len() >= EFFECTS_PER_STEP)?;
        for (from, e) in self.effects.drain(..) {
            self.program.lower(
                self.coords,
                self.role,
                from,
                e,
                &mut self.state,
                &mut self.queues,
            )?;
        }
        if self.finished {
            Program::flush(&mut self.state, &mut self.queues);
        }
        Ok(())
    }

    /// The next op of WarpGroup `wg`, or `None` at the end of its stream.
    fn next(&mut self, wg: usize) -> Result<Option<Op>, LowerError> {
        while self.queues[wg].is_empty() && !self.finished {
            self.step()?;
        }
        Ok(self.queues[wg].pop_front())
    }
}

/// One CTA's run while its WarpGroups pull from it.
struct Cta<'p, 'm, 'a> {
    run: CtaRun<'p, 'm, 'a>,
    /// The position each WarpGroup pulls next.
    pos: Vec<u64>,
    /// WarpGroups that have pulled the end of their stream.
    done: u64,
}

/// The streams of a [`Program`] as the simulator pulls them: a CTA is
/// interpreted as its WarpGroups pull, a few effects ahead of the furthest
/// one, and dropped when every WarpGroup has reached its end, so memory
/// holds the resident CTAs' next few ops, not their streams.
pub struct TtgirSource<'p, 'm, 'a> {
    program: &'p Program<'m, 'a>,
    ctas: HashMap<(u32, u8), Cta<'p, 'm, 'a>, BuildHasherDefault<FnvHasher>>,
    error: Option<String>,
}

impl<'p, 'm, 'a> TtgirSource<'p, 'm, 'a> {
    /// A source of `program`'s streams.
    pub fn new(program: &'p Program<'m, 'a>) -> Self {
        TtgirSource {
            program,
            ctas: HashMap::default(),
            error: None,
        }
    }

    /// The CTA roles whose runs it holds (those pulled and not finished).
    pub fn resident(&self) -> usize {
        self.ctas.len()
    }

    /// Why the last pull failed, if one did.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    fn pull_op(&mut self, cta: u32, role: u8, wg: u8, pos: u64) -> Result<Option<Op>, LowerError> {
        let program = self.program;
        let wgs = program.wgs[role as usize];
        let fresh = || Cta {
            run: CtaRun::new(program, cta, role),
            pos: vec![0; wgs as usize],
            done: 0,
        };
        let c = self.ctas.entry((cta, role)).or_insert_with(fresh);
        let w = wg as usize;
        if pos < c.pos[w] {
            // A run resumed from a snapshot pulls from an earlier place:
            // start the CTA again.
            *c = fresh();
        }
        while c.pos[w] < pos {
            if c.run.next(w)?.is_none() {
                break;
            }
            c.pos[w] += 1;
        }
        let op = c.run.next(w)?;
        c.pos[w] += 1;
        if op.is_none() {
            c.done |= 1 << w;
            if c.done.count_ones() == wgs as u32 {
                self.ctas.remove(&(cta, role));
            }
        }
        Ok(op)
    }
}

impl StreamSource for TtgirSource<'_, '_, '_> {
    fn pull(&mut self, cta: u32, role: u8, wg: u8, pos: u64) -> Result<Option<Op>, SourceError> {
        if self
            .program
            .wgs
            .get(role as usize)
            .map_or(true, |&n| wg >= n)
        {
            self.error = Some(format!("no stream for role {role}, WarpGroup {wg}"));
            return Err(SourceError);
        }
        self.pull_op(cta, role, wg, pos).map_err(|e| {
            self.error = Some(e.to_string());
            SourceError
        })
    }
}
