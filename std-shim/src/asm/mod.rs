//! Text assembly: parser and printer.
