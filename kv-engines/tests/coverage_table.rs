//! docs/engines.md, the coverage table, is generated from the registry
//! scripts' results (docs/coverage/*.tsv, format in docs/coverage/README.md):
//! every architecture of vLLM's, SGLang's and llama.cpp's registries, with
//! what kv does for it on each engine. The test fails while the page is
//! stale or a results file is malformed; `KV_UPDATE_DOCS=1` rewrites the page.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kv_core::fresh::assert_fresh;
use kv_engines::fit::vllm::{CHECKED_ARCHITECTURES, LANGUAGE_MODEL_ONLY_ARCHITECTURES};

/// The engines, in the table's column order: (results file, column title).
const ENGINES: [(&str, &str); 3] = [
    ("docs/coverage/vllm.tsv", "vLLM"),
    ("docs/coverage/sglang.tsv", "SGLang"),
    ("docs/coverage/llamacpp.tsv", "llama.cpp"),
];

const HEADER: &str = "architecture\tstatus\tchecked\tdetail";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    Exact,
    RefusedAlike,
    CannotBuild,
    NotCovered,
}

impl Status {
    const ALL: [Status; 4] = [
        Status::Exact,
        Status::RefusedAlike,
        Status::CannotBuild,
        Status::NotCovered,
    ];

    fn parse(word: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|status| status.key() == word)
    }

    fn key(self) -> &'static str {
        match self {
            Status::Exact => "exact",
            Status::RefusedAlike => "refused-alike",
            Status::CannotBuild => "cannot-build",
            Status::NotCovered => "not-covered",
        }
    }

    /// The words a cell and the counts use.
    fn words(self) -> &'static str {
        match self {
            Status::Exact => "exact",
            Status::RefusedAlike => "refused as the engine refuses",
            Status::CannotBuild => "engine cannot build from a config",
            Status::NotCovered => "not covered",
        }
    }
}

#[derive(Debug)]
struct Row {
    status: Status,
    checked: Option<String>,
    detail: String,
}

#[derive(Debug)]
struct Results {
    title: &'static str,
    /// The first comment line: the engine, its version and its registry.
    engine: String,
    rows: BTreeMap<String, Row>,
}

fn workspace(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("kv-engines is in the workspace")
        .join(path)
}

/// A date as the scripts write it: `YYYY-MM-DD`.
fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 10
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        })
}

/// Parses one results file; every error names the file and line.
fn parse(file: &str, title: &'static str, text: &str) -> Result<Results, String> {
    let mut engine = None;
    let mut header_seen = false;
    let mut rows = BTreeMap::new();
    for (index, line) in text.lines().enumerate() {
        let at = format!("{file}:{}", index + 1);
        if let Some(comment) = line.strip_prefix('#') {
            if engine.is_none() && !header_seen {
                engine = Some(comment.trim().to_owned());
            }
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        if !header_seen {
            if line != HEADER {
                return Err(format!("{at}: the header must be `{HEADER}` (tabs)"));
            }
            header_seen = true;
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let [architecture, status, checked, detail] = fields[..] else {
            return Err(format!(
                "{at}: {} fields; a row has 4, tab-separated",
                fields.len()
            ));
        };
        if architecture.is_empty() || architecture.contains(char::is_whitespace) {
            return Err(format!(
                "{at}: the architecture `{architecture}` is not a name"
            ));
        }
        let status = Status::parse(status).ok_or_else(|| {
            format!(
                "{at}: the status `{status}` is not one of {}",
                Status::ALL.map(Status::key).join(", ")
            )
        })?;
        let checked = match checked {
            "-" if status == Status::NotCovered => None,
            "-" => {
                return Err(format!(
                    "{at}: a `{}` row needs the date it was checked",
                    status.key()
                ))
            }
            date if is_date(date) => Some(date.to_owned()),
            other => return Err(format!("{at}: `{other}` is not a date (YYYY-MM-DD) or `-`")),
        };
        if status != Status::Exact && detail.trim().is_empty() {
            return Err(format!(
                "{at}: a `{}` row needs a detail saying why",
                status.key()
            ));
        }
        let row = Row {
            status,
            checked,
            detail: detail.trim().to_owned(),
        };
        if rows.insert(architecture.to_owned(), row).is_some() {
            return Err(format!("{at}: `{architecture}` is listed twice"));
        }
    }
    let engine =
        engine.ok_or_else(|| format!("{file}: no first comment line naming the engine"))?;
    if !header_seen {
        return Err(format!("{file}: no header line `{HEADER}`"));
    }
    Ok(Results {
        title,
        engine,
        rows,
    })
}

/// Markdown table text: a `|` would end the cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn render(engines: &[Results]) -> String {
    let mut page = String::new();
    let _ = writeln!(page, "# Every architecture each engine serves\n");
    let _ = writeln!(
        page,
        "Generated from the registry scripts' results in `docs/coverage/` by\n\
         `kv-engines/tests/coverage_table.rs`; do not edit (`KV_UPDATE_DOCS=1 cargo test -p\n\
         kv-engines --test coverage_table` rewrites it). A cell says what `kv estimate` does\n\
         for the architecture on that engine, as the engine's own code was run on it:\n\n\
         - **exact**: every quantity kv prints equals the engine's, on the configs run;\n\
         - **refused as the engine refuses**: both refuse, kv in the engine's words;\n\
         - **engine cannot build from a config**: the engine itself cannot (the note says why);\n\
         - **not covered**: kv differs, or it was not run (the note says which);\n\
         - a blank cell: the engine does not serve the architecture.\n"
    );
    let _ = writeln!(page, "## Counts\n");
    let _ = writeln!(
        page,
        "| engine | architectures | {} |",
        Status::ALL.map(Status::words).join(" | ")
    );
    let _ = writeln!(page, "|---|---:|---:|---:|---:|---:|");
    for engine in engines {
        let counts = Status::ALL.map(|status| {
            engine
                .rows
                .values()
                .filter(|row| row.status == status)
                .count()
                .to_string()
        });
        let _ = writeln!(
            page,
            "| {} | {} | {} |",
            cell(&engine.engine),
            engine.rows.len(),
            counts.join(" | ")
        );
    }
    let _ = writeln!(page, "\n{}", fit_counts(&engines[0]));
    let architectures: BTreeSet<&String> = engines
        .iter()
        .flat_map(|engine| engine.rows.keys())
        .collect();
    let _ = writeln!(page, "\n## By architecture\n");
    let _ = writeln!(
        page,
        "| architecture | {} | {FIT_TITLE} |",
        engines
            .iter()
            .map(|e| e.title)
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(page, "|---|{}---|", "---|".repeat(engines.len()));
    for architecture in &architectures {
        let cells: Vec<String> = engines
            .iter()
            .map(|engine| match engine.rows.get(*architecture) {
                None => String::new(),
                Some(row) => match &row.checked {
                    Some(date) => format!("{} ({date})", row.status.words()),
                    None => row.status.words().to_owned(),
                },
            })
            .collect();
        let fit = fit_cell(&engines[0], architecture);
        let _ = writeln!(
            page,
            "| `{}` | {} | {fit} |",
            cell(architecture),
            cells.join(" | ")
        );
    }
    for engine in engines {
        let noted: Vec<(&String, &Row)> = engine
            .rows
            .iter()
            .filter(|(_, row)| !row.detail.is_empty())
            .collect();
        if noted.is_empty() {
            continue;
        }
        let _ = writeln!(page, "\n## Notes: {}\n", engine.title);
        for (architecture, row) in noted {
            let _ = writeln!(
                page,
                "- `{}` ({}): {}",
                architecture,
                row.status.words(),
                row.detail
            );
        }
    }
    page
}

/// The column for `kv fit --engine vllm`'s weights.
const FIT_TITLE: &str = "vLLM weights (`kv fit`)";

/// Whether `kv fit`'s vLLM weights for an architecture vLLM serves were
/// checked against vLLM's own class (scripts/vllm/compare_weights_hf.py):
/// blank where vLLM does not serve it.
fn fit_cell(vllm: &Results, architecture: &str) -> &'static str {
    if !vllm.rows.contains_key(architecture) {
        ""
    } else if CHECKED_ARCHITECTURES.contains(&architecture) {
        "checked"
    } else if LANGUAGE_MODEL_ONLY_ARCHITECTURES.contains(&architecture) {
        "checked with --language-model-only"
    } else {
        "not checked"
    }
}

/// How many of vLLM's exact architectures `kv fit` has checked.
fn fit_counts(vllm: &Results) -> String {
    let exact: Vec<&String> = vllm
        .rows
        .iter()
        .filter(|(_, row)| row.status == Status::Exact)
        .map(|(architecture, _)| architecture)
        .collect();
    let count = |words: &str| exact.iter().filter(|a| fit_cell(vllm, a) == words).count();
    format!(
        "`kv fit --engine vllm`'s weights per rank, checked against vLLM's own class built \
         on the meta device (scripts/vllm/compare_weights_hf.py), of the {} architectures \
         vLLM serves exactly: {} checked, {} checked with `--language-model-only` (the \
         towers not built), {} not checked.",
        exact.len(),
        count("checked"),
        count("checked with --language-model-only"),
        count("not checked")
    )
}

fn load() -> Vec<Results> {
    ENGINES
        .iter()
        .map(|(file, title)| {
            let text = std::fs::read_to_string(workspace(file))
                .unwrap_or_else(|error| panic!("{file}: {error}"));
            parse(file, title, &text).unwrap_or_else(|error| panic!("{error}"))
        })
        .collect()
}

#[test]
fn the_coverage_table_is_fresh() {
    assert_fresh(workspace("docs/engines.md"), &render(&load()));
}

const SAMPLE: &str = "# vLLM 0.33.0 (registry.py)\n\
    architecture\tstatus\tchecked\tdetail\n\
    LlamaForCausalLM\texact\t2026-12-06\t3/3 quantities\n\
    BertModel\tcannot-build\t2026-12-06\tno decoder | pooling only\n\
    FooForCausalLM\tnot-covered\t-\tnot run\n";

#[test]
fn a_results_file_is_read_row_by_row() {
    let results = parse("x.tsv", "vLLM", SAMPLE).unwrap();
    assert_eq!(results.engine, "vLLM 0.33.0 (registry.py)");
    assert_eq!(results.rows.len(), 3);
    let llama = &results.rows["LlamaForCausalLM"];
    assert_eq!(llama.status, Status::Exact);
    assert_eq!(llama.checked.as_deref(), Some("2026-12-06"));
    assert_eq!(results.rows["FooForCausalLM"].checked, None);
}

#[test]
fn the_page_counts_each_status_and_leaves_unserved_cells_blank() {
    let vllm = parse("a.tsv", "vLLM", SAMPLE).unwrap();
    let sglang = parse(
        "b.tsv",
        "SGLang",
        "# SGLang 0.5.23\narchitecture\tstatus\tchecked\tdetail\nQwenForCausalLM\trefused-alike\t2026-12-06\tTP 8 over 4 heads\n",
    )
    .unwrap();
    let page = render(&[vllm, sglang]);
    assert!(
        page.contains("| vLLM 0.33.0 (registry.py) | 3 | 1 | 0 | 1 | 1 |"),
        "{page}"
    );
    assert!(
        page.contains("| SGLang 0.5.23 | 1 | 0 | 1 | 0 | 0 |"),
        "{page}"
    );
    assert!(
        page.contains("| `LlamaForCausalLM` | exact (2026-12-06) |  |"),
        "{page}"
    );
    assert!(
        page.contains("| `QwenForCausalLM` |  | refused as the engine refuses (2026-12-06) |"),
        "{page}"
    );
    assert!(
        page.contains("| `FooForCausalLM` | not covered |  |"),
        "{page}"
    );
    // A `|` in a detail stays inside its line of the notes.
    assert!(page
        .contains("- `BertModel` (engine cannot build from a config): no decoder | pooling only"));
}

#[test]
fn malformed_results_are_refused_naming_the_line() {
    let header = "# e\narchitecture\tstatus\tchecked\tdetail\n";
    for (row, says) in [
        ("A\texact\t2026-12-06", "x.tsv:3: 3 fields"),
        ("A\tfine\t2026-12-06\t", "x.tsv:3: the status `fine`"),
        ("A\texact\t-\t", "x.tsv:3: a `exact` row needs the date"),
        (
            "A\texact\t6/12/2026\t",
            "x.tsv:3: `6/12/2026` is not a date",
        ),
        (
            "A\tcannot-build\t2026-12-06\t ",
            "x.tsv:3: a `cannot-build` row needs a detail",
        ),
        (
            "A B\texact\t2026-12-06\t",
            "x.tsv:3: the architecture `A B`",
        ),
        (
            "A\texact\t2026-12-06\t\nA\texact\t2026-12-06\t",
            "x.tsv:4: `A` is listed twice",
        ),
    ] {
        let error = parse("x.tsv", "e", &format!("{header}{row}\n")).unwrap_err();
        assert!(error.starts_with(says), "{row:?}: {error}");
    }
    assert!(
        parse("x.tsv", "e", "architecture\tstatus\tchecked\tdetail\n")
            .unwrap_err()
            .contains("no first comment line")
    );
    assert!(parse("x.tsv", "e", "# e\nA\texact\t2026-12-06\t\n")
        .unwrap_err()
        .starts_with("x.tsv:2: the header must be"));
    assert!(parse("x.tsv", "e", "# e\n")
        .unwrap_err()
        .contains("no header line"));
}
