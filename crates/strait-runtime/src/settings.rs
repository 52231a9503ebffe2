//! A flow's producer and fetch settings from its clients' keys, resolved as MM2 resolves them
//! and checked as the key catalogue reads them (`strait_core::config`).

use strait_core::config::{ClientProps, Role};
use strait_core::flow::FlowOptions;
use strait_kafka::produce::ProducerConfig;

/// The producer keys strait honours: `delivery.timeout.ms` and `request.timeout.ms`, resolved
/// the way MM2 resolves them (`T.producer.*`, `S->T.producer.*`). Acks are always `all` and
/// idempotence always on.
pub(crate) fn producer_config(props: &ClientProps) -> Result<ProducerConfig, String> {
    let mut config = ProducerConfig::default();
    if let Some(d) = millis(props, Role::Producer, "delivery.timeout.ms")? {
        config.delivery_timeout = d;
    }
    if let Some(d) = millis(props, Role::Producer, "request.timeout.ms")? {
        config.broker_timeout = d;
    }
    if let Some(n) = bytes(props, Role::Producer, "max.request.size")? {
        config.max_request_size = n as usize;
    }
    Ok(config)
}

/// A flow's fetch settings from the source consumer's keys (`S.consumer.*`, then
/// `S->T.consumer.*`, as MM2 resolves them): `fetch.max.wait.ms`, `fetch.min.bytes`,
/// `fetch.max.bytes`, `max.partition.fetch.bytes`, `check.crcs`. Without
/// `max.partition.fetch.bytes`, a fetch gives each partition its share of the fetch's budget
/// rather than 1 MiB ([`FlowOptions::partition_bytes_from_budget`]).
pub(crate) fn fetch_options(props: &ClientProps) -> Result<FlowOptions, String> {
    let mut options = FlowOptions {
        partition_bytes_from_budget: true,
        ..FlowOptions::default()
    };
    if let Some(d) = millis(props, Role::Consumer, "fetch.max.wait.ms")? {
        options.fetch_max_wait = d;
    }
    if let Some(n) = bytes(props, Role::Consumer, "fetch.min.bytes")? {
        options.fetch_min_bytes = n;
    }
    if let Some(n) = bytes(props, Role::Consumer, "fetch.max.bytes")? {
        options.fetch_max_bytes = n;
    }
    if let Some(n) = bytes(props, Role::Consumer, "max.partition.fetch.bytes")? {
        options.partition_max_bytes = n;
        options.partition_bytes_from_budget = false;
    }
    if let Some(check) = value::<bool>(props, Role::Consumer, "check.crcs")? {
        options.check_crcs = check;
    }
    Ok(options)
}

/// `key` of the `role` client as milliseconds.
fn millis(
    props: &ClientProps,
    role: Role,
    key: &str,
) -> Result<Option<std::time::Duration>, String> {
    Ok(value::<u64>(props, role, key)?.map(std::time::Duration::from_millis))
}

/// `key` of the `role` client as a byte count (1 to 2 GiB, the wire's int32).
fn bytes(props: &ClientProps, role: Role, key: &str) -> Result<Option<i32>, String> {
    value::<i32>(props, role, key)
}

/// `key` of the `role` client, checked as the key catalogue reads it, then parsed.
fn value<T: std::str::FromStr>(
    props: &ClientProps,
    role: Role,
    key: &str,
) -> Result<Option<T>, String> {
    let Some(text) = props.checked(role, key)? else {
        return Ok(None);
    };
    let parsed = text.to_ascii_lowercase().parse::<T>().ok();
    parsed
        .map(Some)
        .ok_or_else(|| format!("{}{key} = {text:?} cannot be read", role.prefix()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use strait_core::config::{Side, StraitConfig};

    /// The resolved keys of the `a->b` flow's `side` client in `role`, with `extra` lines.
    fn client_props(extra: &str, side: Side, role: Role) -> ClientProps {
        let config = StraitConfig::parse(&file(extra), "t.properties").unwrap();
        config.client_props(&config.flows[0], side, role)
    }

    fn file(extra: &str) -> String {
        format!(
            "clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\n\
             a->b.enabled = true\n{extra}\n"
        )
    }

    /// A client value strait acts on is checked when the file is read: the error names the
    /// line and the key.
    fn refused(extra: &str) {
        let e = StraitConfig::parse(&file(extra), "t.properties").unwrap_err();
        let key = extra.split(" = ").next().unwrap();
        let text = e.to_string();
        assert!(text.contains(key) && text.contains(":5"), "{extra}: {text}");
    }

    fn props(extra: &str) -> ClientProps {
        client_props(extra, Side::Target, Role::Producer)
    }

    #[test]
    fn producer_timeouts_come_from_the_target_producer_keys() {
        let c = producer_config(&props(
            "b.producer.delivery.timeout.ms = 5000\nb.producer.request.timeout.ms = 700",
        ))
        .unwrap();
        assert_eq!(c.delivery_timeout, std::time::Duration::from_secs(5));
        assert_eq!(c.broker_timeout, std::time::Duration::from_millis(700));
        let defaults = producer_config(&props("")).unwrap();
        assert_eq!(
            defaults.delivery_timeout,
            std::time::Duration::from_secs(120)
        );
        refused("b.producer.delivery.timeout.ms = soon");
        refused("a->b.producer.max.request.size = 0");
        let sized = producer_config(&props("b.producer.max.request.size = 4194304")).unwrap();
        assert_eq!(sized.max_request_size, 4 << 20);
        assert_eq!(defaults.max_request_size, 1 << 20);
    }

    fn consumer_props(extra: &str) -> ClientProps {
        client_props(extra, Side::Source, Role::Consumer)
    }

    #[test]
    fn fetch_settings_come_from_the_source_consumer_keys() {
        let defaults = fetch_options(&consumer_props("")).unwrap();
        assert_eq!(
            defaults.fetch_max_wait,
            std::time::Duration::from_millis(500)
        );
        assert_eq!(
            (
                defaults.fetch_min_bytes,
                defaults.fetch_max_bytes,
                defaults.partition_max_bytes
            ),
            (1, 50 << 20, 1 << 20)
        );
        assert!(defaults.partition_bytes_from_budget);
        assert!(defaults.check_crcs);
        let unchecked =
            fetch_options(&consumer_props("a->b.consumer.check.crcs = FALSE ")).unwrap();
        assert!(!unchecked.check_crcs);
        // The flow's consumer keys, and the cluster's over them, as MM2 resolves them.
        let set = fetch_options(&consumer_props(
            "a->b.consumer.fetch.max.wait.ms = 100\na->b.consumer.fetch.min.bytes = 65536\n\
             a.consumer.fetch.max.bytes = 8388608\na->b.consumer.max.partition.fetch.bytes = 1024\n\
             a.consumer.max.partition.fetch.bytes = 2097152",
        ))
        .unwrap();
        assert_eq!(set.fetch_max_wait, std::time::Duration::from_millis(100));
        assert_eq!(
            (
                set.fetch_min_bytes,
                set.fetch_max_bytes,
                set.partition_max_bytes
            ),
            (65536, 8 << 20, 2 << 20)
        );
        assert!(
            !set.partition_bytes_from_budget,
            "a partition limit the file sets is kept as it is"
        );
        for bad in [
            "a.consumer.fetch.max.bytes = 0",
            "a.consumer.fetch.max.bytes = 3000000000",
            "a.consumer.fetch.min.bytes = lots",
            "a.consumer.check.crcs = yes",
            "a->b.consumer.fetch.max.wait.ms = -1",
        ] {
            refused(bad);
        }
    }
}
