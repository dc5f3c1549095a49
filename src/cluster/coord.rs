//! placeholder
pub struct Coordinator;
