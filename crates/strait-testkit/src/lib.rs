//! Test fixtures for strait's integration tests.
//!
//! [`Clusters`] is two independent Apache Kafka clusters ("source" and "target", single-node
//! KRaft brokers on loopback, see `scripts/test-broker`): [`Clusters::shared`] the pair that
//! `scripts/test` starts once for the whole run, where each test keeps to names of its own
//! ([`Names`]); [`Clusters::start`] a pair of the test's own, killed on drop, either of which can
//! be stopped, killed and started again with its data ([`Clusters::stop_broker`],
//! [`Clusters::kill_broker`], [`Clusters::start_broker`]). [`Rdk`] is a client that shares no
//! code with strait (librdkafka through `scripts/rdk.py`), for writing test data at one end and
//! reading it back at the other; [`kafka_tool`] runs Kafka's own Java tools as a second witness.
//! [`SecureBroker`] is one real broker with TLS and/or SASL, with certificates made at test time
//! by [`TestCa`]. [`OidcServer`] is a real OpenID Connect token server for the OAUTHBEARER
//! tests.
//!
//! Nothing skips: a missing Kafka install or Python venv is a panic that says how to install it
//! (`scripts/test-broker install`; `scripts/test` does it before running the tests).

mod brokers;
mod clusters;
mod env;
pub mod flow_config;
mod java;
mod kerberos;
mod keytool;
mod mm2;
mod names;
mod oidc;
pub mod prometheus;
mod rdk;
mod record;
mod secure;
pub mod served;
mod txn;

pub use clusters::{
    Broker, ClusterOptions, Clusters, Which, QUICK_COMPACTION, SHARED_CLUSTERS_ENV,
};
pub use java::{
    java_command, kafka_classpath, kafka_conf_dir, kafka_tool, mm2_classpath, mm2_java_command,
    mm2_tool, msk_iam_classpath, KAFKA_VERSION, MM2_VERSION, MSK_IAM_AUTH_VERSION,
};
pub use kerberos::{Kdc, REALM};
pub use keytool::{java_keystore, java_truststore, keytool};
pub use mm2::{Mm2, MM2_STARTED};
pub use names::Names;
pub use oidc::{OidcServer, OIDC_SERVER_VERSION};
pub use rdk::{GroupMember, GroupProtocol, Rdk};
pub use record::TestRecord;
pub use secure::{GssapiListener, Scram, SecureBroker, SecureBrokerOptions, TestCa, TestCert};
