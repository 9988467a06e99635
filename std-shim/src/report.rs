//! Human and JSON reports.
