//! The `recon-tools` command line: parses arguments, runs one tool, maps errors to recon's
//! exit codes (`recon::exit`). The binary (`src/main.rs`) only sets up the process as `recon`'s
//! does and calls [`main`].

use crate::{bench_load, bench_status, generate, sim};
use anyhow::Result;
use chrono::NaiveDate;
use clap::{Parser, Subcommand};
use recon::config::Config;
use recon::exit;
use recon::{out, outln};
use std::path::PathBuf;

/// The command line.
#[derive(Parser)]
#[command(
    name = "recon-tools",
    version,
    about = "recon's test and benchmark tools: synthetic data, scoring, benchmarks"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write a seeded synthetic ledger + statement with injected faults and expected outcomes.
    /// With `--days N`: a world of N days (tools/src/sim.rs): the ledger, the daily `psp` and
    /// `bank` files in their final delivered state with control files, the ECB rates files,
    /// `schedule.csv` (when each version arrived), `truth.csv` and a `recon.toml` for the range.
    Generate {
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
        /// Number of payments (with --days: per day; default 10000, with --days 60).
        #[arg(long)]
        payments: Option<usize>,
        /// Seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Day the payments are started on (with --days: the first day; default 2026-11-27,
        /// with --days 2026-10-21).
        #[arg(long)]
        date: Option<NaiveDate>,
        /// Multi-day mode: days with new payments (nights with deliveries and runs follow).
        #[arg(long)]
        days: Option<u32>,
        /// With --days: nights after the last day in which late files still arrive.
        #[arg(long, default_value_t = 4, requires = "days")]
        tail: u32,
        /// How ids are spelled: `uuid` (payment and attempt UUIDs, provider ids `pt_…`) or
        /// `short` (`PAY-0000001`, the old spelling, to compare against).
        #[arg(long, value_enum, default_value_t = generate::IdStyle::Uuid, conflicts_with = "days")]
        ids: generate::IdStyle,
        /// Row order: `time` (payments by creation, attempts by start, lines by booking) or
        /// `payment` (the old order: by payment id, lines shuffled).
        #[arg(long, value_enum, default_value_t = generate::RowOrder::Time, conflicts_with = "days")]
        order: generate::RowOrder,
        /// Percent of payments that end in a ticket (e.g. 6 or 1.4).
        #[arg(long, default_value = "6", value_parser = generate::parse_percent_per_10k, conflicts_with = "days")]
        exceptions: u32,
        /// Recipients paid once each (the old data), instead of several times a day with 1 %
        /// of payments lost twins (same recipient and money, minutes apart) of a payment its
        /// line names.
        #[arg(long, conflicts_with = "days")]
        distinct_recipients: bool,
        /// Merchants to split the night by (0: none). With K ≥ 1 payments.csv gains a
        /// `merchant_id` column (M01 holds about 40 % of the payments), the statement is one
        /// `statement-<merchant>.csv` per merchant and recon.toml declares `[partition]` with one
        /// source per file; with K ≥ 2 a few cross-partition look-alike pairs are added, and a
        /// few payments whose line is booked in another merchant's file, naming them.
        #[arg(long, default_value_t = 0, conflicts_with = "days",
              value_parser = clap::value_parser!(u32).range(0..=i64::from(generate::MAX_PARTITIONS)))]
        partitions: u32,
    },
    /// Compare a run's results.csv with a generated expected.csv.
    Score {
        /// expected.csv from `recon-tools generate`.
        #[arg(long)]
        expected: PathBuf,
        /// results.csv from `recon run`.
        #[arg(long)]
        results: PathBuf,
    },
    /// Benchmark: load the whole ledger and print rows/s (release builds only).
    BenchLoad {
        /// Job configuration (for the database).
        #[arg(long)]
        config: PathBuf,
        /// Repetitions (the best is reported).
        #[arg(long, default_value_t = 3)]
        repeat: usize,
    },
    /// Benchmark: status-API queries against a loopback provider stub (payments/s).
    BenchStatus {
        /// UNKNOWN payments to ask about.
        #[arg(long, default_value_t = 2000)]
        payments: usize,
        /// Requests open at once, at most.
        #[arg(long, default_value_t = 64)]
        max_in_flight: usize,
        /// The stub's latency per request, in milliseconds.
        #[arg(long, default_value_t = 50)]
        latency_ms: u64,
    },
}

/// Parses the process's arguments, runs the command and returns its exit code.
pub fn main() -> i32 {
    run(Cli::parse())
}

/// Runs one parsed command line: its exit code (an error is printed on stderr first).
pub fn run(cli: Cli) -> i32 {
    recon::process::run_to_exit_code(dispatch(cli.command))
}

async fn dispatch(command: Command) -> Result<i32> {
    match command {
        Command::Generate {
            out,
            payments,
            seed,
            date,
            days: Some(days),
            tail,
            ..
        } => {
            let mut opts = sim::SimOptions::new(seed);
            opts.days = days.max(1);
            opts.tail = tail;
            if let Some(n) = payments {
                opts.payments_per_day = u32::try_from(n).unwrap_or(u32::MAX);
            }
            if let Some(d) = date {
                opts.start = d;
            }
            let world = sim::World::build(&opts);
            outln!("{}", world.write_folder(&out)?);
            Ok(exit::OK)
        }
        Command::Generate {
            out,
            payments,
            seed,
            date,
            days: None,
            ids,
            order,
            exceptions,
            distinct_recipients,
            partitions,
            ..
        } => {
            let report = generate::generate(&generate::GenerateOptions {
                ids,
                order,
                exceptions_per_10k: exceptions,
                busy_recipients: !distinct_recipients,
                partitions,
                ..generate::GenerateOptions::new(
                    out,
                    payments.unwrap_or(10_000),
                    seed,
                    date.unwrap_or_else(|| {
                        NaiveDate::from_ymd_opt(2026, 11, 27).unwrap_or_default()
                    }),
                )
            })?;
            out!("{report}");
            Ok(exit::OK)
        }
        Command::Score { expected, results } => {
            let score = generate::score(&expected, &results)?;
            out!("{score}");
            Ok(exit::OK)
        }
        Command::BenchLoad { config, repeat } => {
            let cfg = Config::load(&config)?;
            out!("{}", bench_load::bench_load(&cfg, repeat).await?);
            Ok(exit::OK)
        }
        Command::BenchStatus {
            payments,
            max_in_flight,
            latency_ms,
        } => {
            let latency = std::time::Duration::from_millis(latency_ms);
            out!(
                "{}",
                bench_status::run(payments, max_in_flight, latency).await?
            );
            Ok(exit::OK)
        }
    }
}
