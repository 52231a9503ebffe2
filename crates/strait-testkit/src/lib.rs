//! Test fixtures for strait's integration tests.
//!
//! [`Clusters`] starts two independent real Kafka-protocol brokers ("source" and "target", nisshi
//! on loopback, see `scripts/test-broker`) and stops them on drop; with [`Storage::Sqlite`] either
//! can be stopped and started again with its data ([`Clusters::stop_broker`],
//! [`Clusters::start_broker`]). [`Rdk`] is a client that shares
//! no code with strait (librdkafka through `scripts/rdk.py`), for writing test data at one end and
//! reading it back at the other. [`SecureBroker`] is one real broker with TLS and/or SASL SCRAM,
//! with certificates made at test time by [`TestCa`].
//!
//! Neither skips: a missing broker binary or Python venv is a panic that says how to install it
//! (`scripts/test-broker install`; `scripts/test` does it before running the tests).

mod clusters;
mod env;
mod rdk;
mod record;
mod secure;
mod txn;

pub use clusters::{Broker, Clusters, Storage, Which};
pub use rdk::{GroupMember, Rdk};
pub use record::TestRecord;
pub use secure::{Scram, SecureBroker, SecureBrokerOptions, TestCa, TestCert};
pub use txn::TxnBroker;
