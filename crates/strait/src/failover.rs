//! `strait failover plan|apply|check`: consumer groups moved from a flow's source cluster to its
//! target, planned from the exact offset map (`plan.rs`), applied (`apply.rs`), and whether a
//! failover now would lose anything (`readiness.rs`).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use strait_core::offsets::plan::Direction;

/// `strait failover` arguments.
#[derive(Debug, Args)]
pub(crate) struct FailoverArgs {
    #[command(subcommand)]
    command: FailoverCommand,
}

/// `strait failover ...`.
#[derive(Debug, Subcommand)]
enum FailoverCommand {
    /// Plan moving the consumer groups of a flow `A->B` from A to B.
    ///
    /// Every group on A that the flow carries across (`groups` / `groups.exclude`, narrowed by
    /// --groups) with committed offsets on a mirrored topic. When A does not answer within 5 s
    /// (it is lost), each group's last checkpoint on B stands in for its committed offset on A
    /// (what it read after that checkpoint it reads again). Per partition:
    ///
    ///   SOURCE OFFSET   the group's committed offset on A (the next offset it reads there)
    ///   TARGET OFFSET   where it continues on B: the translation through the exact offset map
    ///   EXACT           yes: every record before TARGET OFFSET was read on A, none after it
    ///   DUPLICATES      records it would read twice: the group is already further on B and
    ///                   applying would move it back (blocked); otherwise 0
    ///   UNREPLICATED    records it read on A that are not on B yet (the recovery-point gap);
    ///                   if the flow mirrors them later, apply refuses the plan as stale
    ///   MISSING AHEAD   records it has not read that B will never have (lost on A before
    ///                   mirroring, or before the map's start)
    ///   TARGET NOW      the group's committed offset on B now (`-`: none); apply refuses a
    ///                   group that moved there since the plan
    ///   STATUS          ready, or blocked: the group is active on B, its committed offset on B
    ///                   is ahead, the topic is not mirrored, or the partition is not in the map
    ///
    /// A table by default; --json prints the plan (the file `failover apply` reads), --out
    /// writes it to a file.
    #[command(verbatim_doc_comment)]
    #[command(after_help = "\
Examples:
  # Read the plan, then write it for `failover apply`:
  strait failover plan --config mm2.properties --flow 'A->B'
  strait failover plan --config mm2.properties --flow 'A->B' \\
      --out plan.json
  # Only some groups:
  strait failover plan --config mm2.properties --flow 'A->B' \\
      --groups 'billing-.*' --out plan.json")]
    Plan(crate::plan::PlanArgs),
    /// Apply a failover plan: commit its target offsets into the same group ids on B.
    ///
    /// Per group: a group already at the planned offsets is left alone ("already applied"); a
    /// group is refused when it is active on B, moved on B since the plan, would move back, when
    /// the offset map now translates its offsets differently (stale plan: re-plan), or when A
    /// answers and the group is active there or its offsets there changed. If A does not answer
    /// within 5 s (lost), that is said and the groups go ahead. Exits non-zero if any group was
    /// refused.
    #[command(after_help = "\
Examples:
  # What would be committed, committing nothing; then apply:
  strait failover apply --config mm2.properties plan.json --dry-run
  strait failover apply --config mm2.properties plan.json")]
    Apply(crate::apply::ApplyArgs),
    /// Is it safe to fail over now? What a failover of each flow would leave behind if its
    /// source were lost at this moment.
    ///
    /// Per flow and group:
    ///
    ///   data          records on A not yet on B, per partition, and how long the oldest has
    ///                 waited (the mirror's lag): lost with A
    ///   POSITION AGE  0 while the group's last checkpoint carries its position on A; else how
    ///                 old the oldest checkpoint behind it is (`N uncaught`: partitions it
    ///                 committed on with no checkpoint yet)
    ///   READ AGAIN    offsets it moved past on A since its last checkpoint: a plan made from
    ///                 the checkpoints (A lost) has it read them again
    ///   EXACT         yes: a failover now places it exactly where it is on A
    ///
    /// Exit status: 0 ready (nothing waits longer than --within, every position at most that
    /// old), 3 not ready, 4 a source did not answer (the check cannot tell what it holds; the
    /// positions shown are the checkpoints'), 1 an error (the target or config). With A
    /// answering, `failover plan` is exact whatever this says; this is for the day A stops.
    #[command(verbatim_doc_comment)]
    #[command(after_help = "\
Examples:
  # Would a failover of A->B now lose records, or re-read any?
  strait failover check --config mm2.properties --flow 'A->B'
  # Ready only when nothing at risk is older than 30 s:
  strait failover check --config mm2.properties --within 30 --json")]
    Check(crate::readiness::CheckArgs),
}

/// Runs `strait failover`.
pub(crate) async fn run(args: FailoverArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        FailoverCommand::Plan(args) => crate::plan::run(Direction::Failover, args).await,
        FailoverCommand::Apply(args) => crate::apply::run(Direction::Failover, args).await,
        FailoverCommand::Check(args) => crate::readiness::run(args).await,
    }
}
