//! strait's replication logic, above the Kafka runtime: MM2 configuration, flows, the offset map,
//! checkpoints and group sync (`DESIGN.md` §3–§5).
//!
//! Empty for now: the foundation issue stops at the runtime. It exists so the layering of the
//! workspace (`strait` → `strait-core` → `strait-kafka` → `strait-wire`) is fixed from the start.
//!
//! - [`config`]: an MM2 `.properties` file read into typed clusters and flows; [`policy`]: MM2's
//!   remote-topic naming and cycle rules; [`filter`]: MM2's topic and group filters.

pub mod config;
pub mod filter;
pub mod policy;
