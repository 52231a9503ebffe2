//! Kafka's own Java programs as independent witnesses: the command-line tools
//! (`ConsumerGroupCommand`, `GetOffsetShell`, ...), MirrorMaker 2 and Java test programs kept
//! under `scripts/kafka/`, run from the jars `scripts/test-broker install` fetches. MirrorMaker 2
//! has a class path of its own (`scripts/mm2/pom.xml`): its release, not the brokers'.

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::env;

/// The Kafka release the tests run against (the one `scripts/kafka/pom.xml` pins).
pub const KAFKA_VERSION: &str = "4.4.0";

/// The MirrorMaker 2 release the tests compare with (the one `scripts/mm2/pom.xml` pins): the
/// newest `connect-mirror` Maven Central serves here, on a class path of its own.
pub const MM2_VERSION: &str = "4.3.1";

/// The JVM class path of the Kafka jars (`<lib>/*`, expanded by the JVM).
pub fn kafka_classpath() -> String {
    format!("{}/*", env::kafka_lib().display())
}

/// The JVM class path of MirrorMaker 2's jars (`<lib>/*`): `connect-mirror`,
/// `connect-mirror-client` and the `kafka-tools` of its release, each dependency at its version.
pub fn mm2_classpath() -> String {
    format!("{}/*", env::mm2_lib().display())
}

/// The version of Amazon's `aws-msk-iam-auth` that `scripts/msk-iam/pom.xml` pins.
pub const MSK_IAM_AUTH_VERSION: &str = "2.3.6";

/// The JVM class path of Amazon's `aws-msk-iam-auth`, its dependencies and `kafka-clients`
/// (`<lib>/*`), which `scripts/test-broker install` fetches into
/// `$STRAIT_CACHE/msk-iam-auth-<version>-kafka-<Kafka version>/lib`.
///
/// # Panics
///
/// If they are not installed, saying how to install them.
pub fn msk_iam_classpath() -> String {
    let lib = env::cache_dir()
        .join(format!(
            "msk-iam-auth-{MSK_IAM_AUTH_VERSION}-kafka-{KAFKA_VERSION}"
        ))
        .join("lib");
    let jar = lib.join(format!("aws-msk-iam-auth-{MSK_IAM_AUTH_VERSION}.jar"));
    if !jar.is_file() {
        panic!(
            "aws-msk-iam-auth not installed: run scripts/test-broker install (no {})",
            jar.display()
        );
    }
    format!("{}/*", lib.display())
}

/// `scripts/kafka/`: the broker and log configs and the Java test programs.
pub fn kafka_conf_dir() -> PathBuf {
    env::scripts_dir().join("kafka")
}

/// `java` (from `$JAVA_HOME` when set) with a small heap, the Kafka class path and the tools'
/// log config (warnings to stderr), ready for a main class or a `.java` source file and its
/// arguments.
///
/// # Panics
///
/// If Kafka is not installed.
pub fn java_command() -> Command {
    env::require_kafka();
    java_on(kafka_classpath())
}

/// [`java_command`] on MirrorMaker 2's class path ([`mm2_classpath`]) instead of the brokers':
/// for `MirrorMaker`, MM2's client library (`MirrorClient`, `RemoteClusterUtils`) and its record
/// formatters.
///
/// # Panics
///
/// If MirrorMaker 2 is not installed.
pub fn mm2_java_command() -> Command {
    env::require_mm2();
    java_on(mm2_classpath())
}

fn java_on(classpath: String) -> Command {
    let java = std::env::var_os("JAVA_HOME")
        .map(|home| PathBuf::from(home).join("bin").join("java"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("java"));
    let mut command = Command::new(java);
    command
        .arg("-Xmx256m")
        .arg(format!(
            "-Dlog4j2.configurationFile={}",
            kafka_conf_dir().join("tools-log4j2.properties").display()
        ))
        .arg("-cp")
        .arg(classpath);
    command
}

/// Runs a Kafka tool's main class (e.g. `org.apache.kafka.tools.consumer.group.ConsumerGroupCommand`)
/// with `args` and returns its stdout.
///
/// # Panics
///
/// If it cannot run or exits non-zero; the message carries its output.
pub fn kafka_tool(main_class: &str, args: &[&str]) -> String {
    run_tool(java_command(), main_class, args)
}

/// [`kafka_tool`] on MirrorMaker 2's class path: a tool of MM2's release, e.g. its
/// `ConsoleConsumer` with one of MM2's formatters.
///
/// # Panics
///
/// If it cannot run or exits non-zero; the message carries its output.
pub fn mm2_tool(main_class: &str, args: &[&str]) -> String {
    run_tool(mm2_java_command(), main_class, args)
}

fn run_tool(mut command: Command, main_class: &str, args: &[&str]) -> String {
    let output = command
        .arg(main_class)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run java {main_class}: {e}"));
    expect_success(&format!("{main_class} {}", args.join(" ")), &output);
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn expect_success(what: &str, output: &Output) {
    if !output.status.success() {
        panic!(
            "{what} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
