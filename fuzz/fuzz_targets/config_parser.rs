//! strait's configuration reader (`strait_core::config`) on arbitrary file contents: the bytes
//! are decoded as `StraitConfig::load` decodes a file, then parsed and resolved. Any outcome is
//! fine but a panic; an error must name the file it came from.
//!
//! Config values may reference files and environment variables (`${file:...}`, `${dir:...}`,
//! `${env:...}`, KIP-297); inputs that name a device or kernel file (`/dev/zero` would be read
//! for ever) are skipped, and the runner starts in an empty directory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strait_core::config::{properties, StraitConfig};

const PATH: &str = "fuzz.properties";

fuzz_target!(|data: &[u8]| {
    let text = properties::decode(data);
    if ["dev", "proc", "sys"].iter().any(|d| text.contains(d)) {
        return;
    }
    match StraitConfig::parse(&text, PATH) {
        Ok(cfg) => {
            assert!(!cfg.flows.is_empty(), "a config without flows is refused");
            for flow in &cfg.flows {
                // What a flow is asked about at run time, on its own names.
                let _ = flow.remote_topic("orders");
                let _ = flow.checkpoints_topic();
                let _ = flow.should_replicate_group("group");
                let _ = cfg
                    .cluster(flow.source.as_str())
                    .expect("a flow's source is a cluster");
            }
            // Rendering for logs must not panic either (secrets are redacted there).
            let _ = format!("{cfg:?}");
        }
        Err(e) => {
            assert_eq!(e.path, std::path::Path::new(PATH));
            let _ = e.to_string();
        }
    }
});
