//! `strait failback plan|apply`: consumer groups moved back from a flow's target cluster to its
//! source, the offset map read backwards (`plan.rs`, `apply.rs`).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use strait_core::offsets::plan::Direction;

/// `strait failback` arguments.
#[derive(Debug, Args)]
pub(crate) struct FailbackArgs {
    #[command(subcommand)]
    command: FailbackCommand,
}

/// `strait failback ...`.
#[derive(Debug, Subcommand)]
enum FailbackCommand {
    /// Plan moving the consumer groups of a flow `A->B` back from B to A.
    ///
    /// Every group on B (passing the flow's group filter and --groups) with committed offsets on
    /// the flow's remote topics; per partition, through the offset map read backwards:
    ///
    ///   TARGET OFFSET   the group's committed offset on B's remote topic
    ///   SOURCE OFFSET   where it continues on A, for the records that came from A
    ///   EXACT           yes: every record from A before SOURCE OFFSET was read on B, none after
    ///   DUPLICATES      records it would read twice: the group is already further on A and
    ///                   applying would move it back (blocked); otherwise 0
    ///   UNREPLICATED    records it read on B that A does not have (written on B after the
    ///                   failover): a B->A flow is needed to copy them
    ///   MISSING AHEAD   records on B ahead of the group that A does not have: it will not see
    ///                   them on A unless a B->A flow copies them
    ///   SOURCE NOW      the group's committed offset on A now (`-`: none)
    ///   STATUS          ready, or blocked: the group is active on A, ahead on A, or the
    ///                   partition is not in the map
    ///
    /// A table by default; --json prints the plan, --out writes it to a file.
    #[command(verbatim_doc_comment)]
    #[command(after_help = "\
Examples:
  strait failback plan --config mm2.properties --flow 'A->B'
  strait failback plan --config mm2.properties --flow 'A->B' \\
      --out back.json")]
    Plan(crate::plan::PlanArgs),
    /// Apply a failback plan: commit its source offsets into the same group ids on A, with the
    /// same checks as `failover apply` (B is the origin here).
    #[command(after_help = "\
Examples:
  strait failback apply --config mm2.properties back.json --dry-run
  strait failback apply --config mm2.properties back.json")]
    Apply(crate::apply::ApplyArgs),
}

/// Runs `strait failback`.
pub(crate) async fn run(args: FailbackArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        FailbackCommand::Plan(args) => crate::plan::run(Direction::Failback, args).await,
        FailbackCommand::Apply(args) => crate::apply::run(Direction::Failback, args).await,
    }
}
