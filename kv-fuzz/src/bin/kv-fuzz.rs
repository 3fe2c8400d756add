//! `kv-fuzz TARGET [--cases N] [--seed S] [--start K] [--out DIR]`: a run of
//! one target (gguf, config, report); exit 0 when no property broke, 1
//! when one did, 2 for bad usage, 3 for a hang, and an abort naming the
//! case for memory past the bound.

use std::path::PathBuf;
use std::process::ExitCode;

use kv_fuzz::alloc::BoundedAlloc;
use kv_fuzz::{run, Plan, Target};

#[global_allocator]
static ALLOC: BoundedAlloc = BoundedAlloc;

const USAGE: &str =
    "usage: kv-fuzz gguf|config|report [--cases N] [--seed S] [--start K] [--out DIR]";

fn main() -> ExitCode {
    match plan(std::env::args().skip(1).collect()) {
        Ok(plan) => {
            let summary = run(&plan);
            print!("{} seed {}: {summary}", plan.target.name(), plan.seed);
            if summary.clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(problem) => {
            eprintln!("kv-fuzz: {problem}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn plan(args: Vec<String>) -> Result<Plan, String> {
    let mut args = args.into_iter();
    let name = args.next().ok_or("no target given")?;
    let target = Target::from_name(&name).ok_or(format!("no target `{name}`"))?;
    let mut plan = Plan {
        target,
        seed: 1,
        start: 0,
        cases: 10_000,
        out: None,
    };
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag} takes a whole number, not `{value}`"))
        };
        match flag.as_str() {
            "--cases" => plan.cases = number()?,
            "--seed" => plan.seed = number()?,
            "--start" => plan.start = number()?,
            "--out" => plan.out = Some(PathBuf::from(&value)),
            _ => return Err(format!("no flag {flag}")),
        }
    }
    Ok(plan)
}
