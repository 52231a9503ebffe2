//! JSON rows that both the CLI (`--json`) and the HTTP API answer with, defined once so the two
//! never drift apart (`docs/http-api.md`).

use serde::Serialize;
use serde_json::{json, Value};
use strait_core::offsets::TranslatedOffset;
use strait_wire::offset_map::{ReverseTranslation, Translation};

/// One partition of a consumer group's committed source offsets, translated through a flow's
/// map: a row of `strait offsets translate --json` and of `GET /v1/groups/{group}`.
#[derive(Debug, Clone, Serialize)]
pub struct GroupOffsetRow {
    /// `A->B`.
    pub flow: String,
    /// The group.
    pub group: String,
    /// The source topic.
    pub topic: String,
    /// The partition (the same on both clusters).
    pub partition: i32,
    /// The topic's name on the target.
    pub remote_topic: String,
    /// The group's committed offset on the source.
    pub source_offset: i64,
    /// Where it continues on the target; `null` when the map cannot say.
    pub target_offset: Option<i64>,
    /// Whether that is exact.
    pub exact: bool,
    /// The translation's kind and numbers ([`translation_json`]).
    pub result: Value,
    /// The commit's metadata string.
    pub metadata: Option<String>,
    /// What the translation means, in words.
    pub note: String,
}

impl GroupOffsetRow {
    pub fn new(flow: &str, group: &str, t: &TranslatedOffset) -> Self {
        Self {
            flow: flow.to_owned(),
            group: group.to_owned(),
            topic: t.topic.clone(),
            partition: t.partition,
            remote_topic: t.remote_topic.clone(),
            source_offset: t.source_offset,
            target_offset: t.target_offset(),
            exact: t.is_exact(),
            result: translation_json(&t.translation),
            metadata: t.metadata.clone(),
            note: t.note(),
        }
    }
}

/// A translation as JSON: `{"kind": ..., and its numbers}`.
pub fn translation_json(t: &Translation) -> Value {
    match *t {
        Translation::Exact { target } => json!({ "kind": "exact", "target": target }),
        Translation::PastMappedEnd {
            target,
            unreplicated,
        } => json!({ "kind": "past_mapped_end", "target": target, "unreplicated": unreplicated }),
        Translation::BeforeMappedStart { target, skipped } => {
            json!({ "kind": "before_mapped_start", "target": target, "skipped": skipped })
        }
        Translation::InLostRange { target, lost } => {
            json!({ "kind": "in_lost_range", "target": target, "lost": lost })
        }
        Translation::Compacted {
            target,
            reread_at_most,
        } => json!({ "kind": "compacted", "target": target, "reread_at_most": reread_at_most }),
        Translation::Unmapped => json!({ "kind": "unmapped" }),
    }
}

/// A reverse translation as JSON.
pub fn reverse_json(t: &ReverseTranslation) -> Value {
    match *t {
        ReverseTranslation::Exact { source } => json!({ "kind": "exact", "source": source }),
        ReverseTranslation::InTargetGap { source, foreign } => {
            json!({ "kind": "in_target_gap", "source": source, "foreign": foreign })
        }
        ReverseTranslation::PastMappedEnd { source, unmapped } => {
            json!({ "kind": "past_mapped_end", "source": source, "unmapped": unmapped })
        }
        ReverseTranslation::Compacted {
            source,
            reread_at_most,
        } => json!({ "kind": "compacted", "source": source, "reread_at_most": reread_at_most }),
        ReverseTranslation::Unmapped => json!({ "kind": "unmapped" }),
    }
}
