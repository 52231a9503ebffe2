//! Failover and failback plans: being written (see the offsets issue).
