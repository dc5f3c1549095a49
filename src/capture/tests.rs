//! Unit tests of `capture`'s pure parts.
