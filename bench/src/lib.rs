//! strait's benchmark tools, shared by the binaries in `src/bin`:
//!
//! - [`workload`]: the records every benchmark writes (deterministic, realistically
//!   compressible values, a key and a header per record);
//! - [`rdk`]: librdkafka clients (the `rdkafka` crate, bundled librdkafka) with the throughput
//!   settings the baseline mirror, the source loader and the produce-only runs share;
//! - [`raw`]: reading a topic's record batches as stored, with strait's own client, to count
//!   wire bytes and to replay the same batches for the broker-bound ceiling;
//! - [`precision`]: consumer-offset translation at failover, strait's exact map against the
//!   model of MirrorMaker 2's sampled offset syncs, on synthetic partitions;
//! - [`watch`]: a mirror watched from outside (the target's end offsets and the processes'
//!   CPU, polled), and the topic clean-up between runs.
//!
//! Nothing here is part of strait: this is its own cargo project, built by `bench/run`.

pub mod precision;
pub mod raw;
pub mod rdk;
pub mod watch;
pub mod workload;

/// Seconds since `start`, as a float, for the JSON results.
pub fn secs(start: std::time::Instant) -> f64 {
    start.elapsed().as_secs_f64()
}
