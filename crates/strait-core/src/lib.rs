//! strait's replication logic, above the Kafka runtime: MM2 configuration, flows, the offset map,
//! checkpoints and group sync (`docs/design.md` §3–§5).
//!
//! Its modules:
//! - [`config`]: an MM2 `.properties` file read into typed clusters and flows; [`policy`]: MM2's
//!   remote-topic naming and cycle rules; [`filter`]: MM2's topic and group filters.
//! - [`flow`]: one `A->B` flow: remote topics, the data path, the offset map.
//! - [`internal`]: strait's own topics (the offset map's, MM2's offset syncs) and the helpers
//!   that checkpoints and heartbeats share with them.
//! - [`offsets`]: consumer-group offsets translated through the map, both ways.
//! - [`heartbeats`]: MM2's heartbeats; [`acls`]: MM2's topic ACL sync.
//! - [`scale`]: many workers sharing the flows through a group on the target cluster: units of
//!   work, the leader's assignor, the member that follows the group.
//! - [`metrics`]: what is counted, for `/metrics`; [`status`]: what each flow is doing now,
//!   for `/v1/status`.
//! - [`verify`]: source and target compared record by record through the map (`strait verify`).

pub mod acls;
pub mod config;
#[cfg(test)]
mod event_capture;
pub mod filter;
pub mod flow;
pub mod heartbeats;
pub mod internal;
pub mod metrics;
pub mod offsets;
pub mod policy;
pub mod scale;
pub mod status;
pub mod verify;
