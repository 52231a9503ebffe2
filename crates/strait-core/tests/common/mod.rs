//! Setup shared by the flow tests: clients, a `source->target` flow config, a started flow.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use strait_core::config::{FlowConfig, StraitConfig};
use strait_core::flow::{Flow, FlowOptions};
use strait_kafka::{Client, ClientConfig};

/// A client with a 20 s operation timeout; logs to the test's output with `RUST_LOG`.
pub async fn client(bootstrap: &str) -> Client {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let mut config = ClientConfig::new([bootstrap]);
    config.operation_timeout = Duration::from_secs(20);
    Client::connect(config).await.expect("connect")
}

/// The `source->target` flow of an MM2 config for one-broker clusters, plus `extra` lines.
pub fn flow_config(source: &str, target: &str, extra: &str) -> FlowConfig {
    let text = format!(
        "clusters = source, target\n\
         source.bootstrap.servers = {source}\n\
         target.bootstrap.servers = {target}\n\
         source->target.enabled = true\n\
         replication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\n\
         heartbeats.topic.replication.factor = 1\n\
         {extra}\n"
    );
    let config = StraitConfig::parse(&text, "test.properties").expect("valid config");
    config
        .flows
        .into_iter()
        .find(|f| f.source.as_str() == "source")
        .expect("source->target flow")
}

/// That flow started, fetching with a 50 ms wait.
pub async fn start_flow(source: &str, target: &str, extra: &str) -> Flow {
    let options = FlowOptions {
        fetch_max_wait: Duration::from_millis(50),
        ..FlowOptions::default()
    };
    Flow::start(
        flow_config(source, target, extra),
        options,
        client(source).await,
        client(target).await,
    )
    .await
    .expect("flow starts")
}
