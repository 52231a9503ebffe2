//! A full mirror between two secured clusters: A speaks SASL_SSL with SCRAM-SHA-512, B speaks
//! SASL_SSL with SCRAM-SHA-256, both with certificates made for the test. librdkafka writes to A
//! and reads B back (same records, same order); `strait run --until-caught-up` and `strait map`
//! connect from the MM2 file's settings, one password coming from `${env:...}`, the other
//! written in the file. Nothing either password is found in anything strait printed, at debug
//! level.

mod running;

use running::{flow_properties, run_to_end, run_until_caught_up, write_properties};
use strait_testkit::{Rdk, Scram, SecureBroker, SecureBrokerOptions, TestCa, TestRecord};

const TOPIC: &str = "secure-orders";
const A_PASSWORD: &str = "a-pass-Zq81-from-env";
const B_PASSWORD: &str = "b-pass-Wx42-in-file";

fn rdk_for(ca_path: &str, mechanism: &str, user: &str, password: &str) -> Rdk {
    Rdk::new().with_client_config(&[
        ("security.protocol", "SASL_SSL"),
        ("ssl.ca.location", ca_path),
        ("ssl.endpoint.identification.algorithm", "https"),
        ("sasl.mechanism", mechanism),
        ("sasl.username", user),
        ("sasl.password", password),
    ])
}

#[test]
fn a_mirror_between_tls_and_scram_clusters_keeps_every_record_and_no_secret() {
    let ca = TestCa::new("strait secure mirror test");
    let a = SecureBroker::start(SecureBrokerOptions {
        tls: Some(ca.server_cert(&["127.0.0.1"])),
        users: vec![("mirror".into(), A_PASSWORD.into(), Scram::Sha512)],
        ..SecureBrokerOptions::default()
    });
    let b = SecureBroker::start(SecureBrokerOptions {
        tls: Some(ca.server_cert(&["127.0.0.1"])),
        users: vec![("mirror".into(), B_PASSWORD.into(), Scram::Sha256)],
        ..SecureBrokerOptions::default()
    });
    let dir = a.dir().to_owned();
    let ca_path = dir.join("ca.pem");
    std::fs::write(&ca_path, ca.pem()).expect("write CA");
    let ca_path = ca_path.to_str().expect("utf-8 path");

    let rdk_a = rdk_for(ca_path, "SCRAM-SHA-512", "mirror", A_PASSWORD);
    let rdk_b = rdk_for(ca_path, "SCRAM-SHA-256", "mirror", B_PASSWORD);
    rdk_a.create_topic(&a.bootstrap, TOPIC, 2);
    let records: Vec<TestRecord> = (0..600)
        .map(|i| {
            TestRecord::new(
                i % 2,
                Some(format!("k{i}").as_bytes()),
                Some(format!("secured-{i}").as_bytes()),
            )
            .with_header("trace", Some(b"x"))
        })
        .collect();
    rdk_a.produce(&a.bootstrap, TOPIC, &records[..300], "lz4");
    rdk_a.produce(&a.bootstrap, TOPIC, &records[300..], "zstd");

    let text = flow_properties(
        ("A", &a.bootstrap),
        ("B", &b.bootstrap),
        &format!(
            "A->B.topics = {TOPIC}\n\
             security.protocol = SASL_SSL\n\
             ssl.truststore.location = {ca_path}\n\
             A.sasl.mechanism = SCRAM-SHA-512\n\
             A.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule \
             required username=\"mirror\" password=\"${{env:STRAIT_TEST_A_PASSWORD}}\";\n\
             B.sasl.mechanism = SCRAM-SHA-256\n\
             B.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule \
             required username=\"mirror\" password=\"{B_PASSWORD}\";"
        ),
    );
    let config = write_properties(&dir, "secure.properties", &text);
    let config = config.to_str().expect("utf-8 path");

    let mut printed = String::new();
    for args in [
        run_until_caught_up(config).to_vec(),
        vec!["map", "--config", config],
    ] {
        let out = run_to_end(
            &dir,
            &args,
            &[
                ("RUST_LOG", "debug"),
                ("STRAIT_TEST_A_PASSWORD", A_PASSWORD),
            ],
        );
        let text = format!("{}{}", out.stdout, out.stderr);
        assert!(
            out.ok(),
            "strait {} failed: {}\n{text}",
            args.join(" "),
            out.status
        );
        printed.push_str(&text);
    }
    assert!(
        printed.contains("A.secure-orders"),
        "strait map lists the mirrored partitions:\n{printed}"
    );

    let mirrored = rdk_b.consume(
        &b.bootstrap,
        &format!("A.{TOPIC}"),
        records.len(),
        std::time::Duration::from_secs(30),
    );
    assert_eq!(mirrored.len(), records.len());
    for partition in 0..2 {
        let sent: Vec<&TestRecord> = records
            .iter()
            .filter(|r| r.partition == partition)
            .collect();
        let got: Vec<&TestRecord> = mirrored
            .iter()
            .filter(|r| r.partition == partition)
            .collect();
        assert_eq!(sent.len(), got.len(), "partition {partition}");
        for (s, g) in sent.iter().zip(&got) {
            assert_eq!(
                (&s.key, &s.value, &s.headers),
                (&g.key, &g.value, &g.headers)
            );
        }
    }

    assert!(printed.lines().count() > 20, "debug logs were printed");
    for secret in [A_PASSWORD, B_PASSWORD] {
        assert!(
            !printed.contains(secret),
            "a password appears in strait's output"
        );
    }
}
