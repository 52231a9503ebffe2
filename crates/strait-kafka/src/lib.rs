//! strait's Kafka runtime, on the `kafka-protocol` codec crate.
//!
//! - [`connection`]: one broker connection (framing, ApiVersions, pipelining, timeouts, throttling,
//!   one failure to every waiter), secured by [`connection::Security`]: [`tls`] and [`sasl`].
//! - [`cluster`]: a [`Client`] for one cluster: bootstrap, metadata cache, reconnects with backoff,
//!   routing to leaders and coordinators, retries.
//! - [`admin`]: topics, configs, partitions, list offsets, cluster, ACLs, delete records.
//! - [`groups`]: consumer-group offsets for any group: coordinator, list, describe, fetch, commit.
//! - [`fetch`]: raw multi-partition fetch; batches come back as bytes, never decompressed.
//! - [`produce`]: a raw idempotent producer that forwards fetched batches unopened.
//! - [`lease`]: a group member's right to write, which lapses by the clock.
//!
//! - [`aws`]: AWS credentials and SigV4, for Amazon MSK's IAM authentication ([`sasl::msk_iam`]).
//!
//! Errors are one [`Error`] enum; [`Error::is_retriable`] says whether trying again can help.

pub mod admin;
pub mod aws;
pub mod backoff;
mod civil;
pub mod cluster;
pub mod connection;
pub mod error;
pub mod fetch;
pub mod groups;
mod ids;
pub mod lease;
pub mod membership;
pub mod produce;
pub mod reach;
pub mod sasl;
pub mod secret;
pub mod throttle;
pub mod tls;
mod transport;

pub use cluster::{BrokerId, Client, ClientConfig, Metadata, TopicPartition};
pub use connection::Security;
pub use error::{Context, Error, Result};
pub use secret::Secret;
