//! What a run reports: the text and JSON report ([`report`]), the Gantt
//! timeline of one SM as a Chrome trace ([`gantt`]) and as an SVG chart
//! ([`gantt_svg`]), and the SVG line charts of calibration curves and
//! sweeps ([`svg`]).
//!
//! These modules use the core, [`crate::run`]'s outcome and
//! [`crate::load`]'s file writing; the calibration, the sweeps and the
//! command-line front-end use them.

pub mod gantt;
pub mod gantt_svg;
pub mod report;
pub mod svg;
