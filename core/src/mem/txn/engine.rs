//! The SM side of the transaction-level model: each SM's TMA engine emits
//! its lines `lines_per_cycle` per cycle with at most `max_lines` in
//! flight, waiting for the earliest outstanding return when all are taken
//! (step 1 of [`super`]).

use super::*;

impl Model<'_> {
    /// Counts back every line of SM `sm` returning at or before `e`.
    #[inline]
    pub(super) fn back_by(&mut self, sm: usize, eng: &mut Engine, e: u64) {
        if e < eng.cursor {
            return;
        }
        let words = (FLIGHT / 64) as usize;
        let cb = sm * FLIGHT as usize;
        let nb = sm * words;
        if e - eng.cursor >= FLIGHT || eng.out == 0 {
            if eng.out != 0 {
                self.flight[cb..cb + FLIGHT as usize].fill(0);
                self.flight_nz[nb..nb + words].fill(0);
            }
            eng.out = 0;
            eng.cursor = e + 1;
            return;
        }
        // Cycles cursor..=e, word by word of the bitmap.
        let mut c = eng.cursor;
        while c <= e {
            let w = ((c / 64) % (words as u64)) as usize;
            let off = c % 64;
            let n = (64 - off).min(e - c + 1);
            let mask = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << off
            };
            let mut bits = self.flight_nz[nb + w] & mask;
            self.flight_nz[nb + w] &= !mask;
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let i = cb + w * 64 + b;
                eng.out = eng.out.saturating_sub(self.flight[i]);
                self.flight[i] = 0;
            }
            c += n;
        }
        eng.cursor = e + 1;
    }

    /// Counts lines of SM `sm` back, earliest first, until `need` of them
    /// are (or none is left in flight); returns the cycle the last of them
    /// is back.
    #[inline]
    pub(super) fn wait_back(&mut self, sm: usize, eng: &mut Engine, need: u32) -> u64 {
        let words = (FLIGHT / 64) as usize;
        let cb = sm * FLIGHT as usize;
        let nb = sm * words;
        let mut got = 0u32;
        let mut c = eng.cursor;
        for _ in 0..=words {
            if eng.out == 0 {
                break;
            }
            let w = ((c / 64) % (words as u64)) as usize;
            let off = c % 64;
            let mut bits = self.flight_nz[nb + w] & (u64::MAX << off);
            while bits != 0 {
                let b = bits.trailing_zeros() as u64;
                bits &= bits - 1;
                let i = cb + w * 64 + b as usize;
                let k = self.flight[i];
                self.flight[i] = 0;
                self.flight_nz[nb + w] &= !(1u64 << b);
                eng.out = eng.out.saturating_sub(k);
                got += k as u32;
                if got >= need || eng.out == 0 {
                    let at = c - off + b;
                    eng.cursor = at + 1;
                    return at;
                }
            }
            c += 64 - off;
        }
        // Unreachable with lines in flight; a damaged snapshot lands here.
        eng.out = 0;
        eng.cursor
    }

    /// The emission cycle of line `j` (from 0) of a chunk of SM `sm`: the
    /// next of at most `lines_per_cycle` slots per cycle, once this line
    /// and the chunk's `j` before it fit in the `max_lines` in flight (the
    /// line-level engine's rule). A chunk's own lines cannot be back before
    /// it has left, so only earlier chunks' lines free places. The count in
    /// flight is brought up to date at a chunk's first line (which keeps
    /// the window of return cycles current); after that it may still hold
    /// lines back by now, and when it says a line does not fit, the
    /// earliest returns are counted back until it does, the line leaving
    /// at the later of its slot and the last of them.
    #[inline(always)]
    pub(super) fn emit(&mut self, sm: usize, eng: &mut Engine, j: u32) -> u64 {
        if eng.used >= self.tma.lines_per_cycle {
            eng.free += self.tma.line_interval as u64;
            eng.used = 0;
        }
        if j == 0 {
            self.back_by(sm, eng, eng.free);
        }
        let need = (eng.out as u32 + j + 1).saturating_sub(self.tma.max_lines as u32);
        if need > 0 {
            self.wait_to_emit(sm, eng, need);
        }
        eng.used += 1;
        eng.free
    }

    /// [`Model::emit`] for a line that does not fit yet: moves the
    /// engine's slot to when `need` more lines are back, if later.
    #[inline(never)]
    pub(super) fn wait_to_emit(&mut self, sm: usize, eng: &mut Engine, need: u32) {
        let w = self.wait_back(sm, eng, need);
        eng.slot_at(w, self.tma.line_interval);
    }

    /// Adds `n` lines of SM `sm` returning at `r` (after their emission).
    #[inline]
    pub(super) fn returns(&mut self, sm: usize, eng: &mut Engine, r: u64, n: u8) {
        let r = r.clamp(eng.cursor, eng.cursor + FLIGHT - 1);
        let words = FLIGHT / 64;
        let w = ((r / 64) % words) as usize;
        self.flight[sm * FLIGHT as usize + w * 64 + (r % 64) as usize] += n as u16;
        self.flight_nz[sm * words as usize + w] |= 1 << (r % 64);
        eng.out += n as u16;
    }
}
