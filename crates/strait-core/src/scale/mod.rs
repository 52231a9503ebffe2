//! Scale-out: several `strait run` processes with one config share its flows as members of one
//! group on the target cluster, the way Kafka Connect's workers share MM2's tasks
//! (`docs/design.md` §7).
//!
//! - [`units`]: a flow cut into `tasks.max` units, and which unit a partition belongs to;
//! - [`assign`]: the leader's assignor, balanced and sticky (a pure function);
//! - [`worker`]: a member of the workers' group, publishing what it owns.

pub mod assign;
pub mod units;
pub mod worker;

pub use assign::{assign, claims_of, hand_over, Claim};
pub use units::{unit_index, Unit, UnitFilter};
pub use worker::{Agreement, Ownership, Worker, WorkerError, PROTOCOL_TYPE};
