//! `RUN_DIR[=NAME]` arguments and reading the run folders they name. Every failure is
//! one line naming the path and the fix (`c1m compare` exits 2 on it).

use std::{
    path::{Path, PathBuf},
    str::FromStr,
};

use thiserror::Error;

use crate::model::RunRecord;
use crate::report::{ExportError, load_run};

/// Why `c1m compare`'s arguments name no set of readable run folders.
#[derive(Debug, Error)]
pub enum InputError {
    /// No run folder was given.
    #[error("no runs given: pass run folders, e.g. c1m compare c1m-runs/A=go c1m-runs/B=node")]
    NoRuns,
    /// `RUN_DIR=` with nothing after the `=`.
    #[error("{arg}: empty name after '=': write RUN_DIR=NAME or just RUN_DIR")]
    EmptyName {
        /// The argument as given.
        arg: String,
    },
    /// The folder given does not exist.
    #[error("{}: no such folder: pass a run folder written by c1m run (c1m-runs/<timestamp>/)", .0.display())]
    Missing(PathBuf),
    /// One folder given twice: each run folder is one run.
    #[error(
        "{}: given twice (as {first} and as {second}): one folder is one run; repeats are runs in folders of their own",
        dir.display()
    )]
    Twice {
        /// The folder.
        dir: PathBuf,
        /// The name it had first.
        first: String,
        /// The name it had second.
        second: String,
    },
    /// The last `=` was taken for `RUN_DIR=NAME`, but the whole argument is the folder.
    #[error(
        "{}: no such folder, but {} is one: the last '=' splits RUN_DIR=NAME, so give its name after one more: {}=NAME",
        dir.display(), whole.display(), whole.display()
    )]
    EqualsInName {
        /// The folder before the last `=` (it does not exist).
        dir: PathBuf,
        /// The whole argument, which is a folder.
        whole: PathBuf,
    },
    /// The folder's summary.json could not be read as a run.
    #[error("{0}")]
    Load(#[from] ExportError),
}

/// One `RUN_DIR[=NAME]` argument. Runs that share a name are repeats of one setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSpec {
    /// The run folder.
    pub dir: PathBuf,
    /// Given after `=`, else the folder's own name.
    pub name: String,
}

impl FromStr for RunSpec {
    type Err = InputError;

    fn from_str(arg: &str) -> Result<Self, InputError> {
        // The last '=' splits: a folder name may hold one, a run name may not.
        let (dir, name) = match arg.rsplit_once('=') {
            Some((_, "")) => {
                return Err(InputError::EmptyName {
                    arg: arg.to_owned(),
                });
            }
            Some((dir, name)) => (PathBuf::from(dir), name.to_owned()),
            None => {
                let dir = PathBuf::from(arg);
                let name = folder_name(&dir);
                (dir, name)
            }
        };
        Ok(RunSpec { dir, name })
    }
}

fn folder_name(dir: &Path) -> String {
    dir.components()
        .next_back()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .filter(|n| n != "." && !n.is_empty())
        .unwrap_or_else(|| dir.display().to_string())
}

/// One run read back, with the name it is compared under.
#[derive(Debug, Clone)]
pub(crate) struct LoadedRun {
    pub spec: RunSpec,
    pub run: RunRecord,
}

#[cfg(test)]
impl LoadedRun {
    /// A run loaded from a folder named as it is (tests build comparisons from records).
    pub(crate) fn named(name: &str, run: RunRecord) -> LoadedRun {
        LoadedRun {
            spec: RunSpec {
                dir: name.into(),
                name: name.into(),
            },
            run,
        }
    }
}

/// Reads every run; the first bad one ends it. A folder named twice is refused: as two
/// repeats it turned single runs into "apart (+0.0%)" rows, a spread of zero.
pub(crate) fn load_all(specs: &[RunSpec]) -> Result<Vec<LoadedRun>, InputError> {
    if specs.is_empty() {
        return Err(InputError::NoRuns);
    }
    let mut seen: Vec<(PathBuf, &RunSpec)> = Vec::new();
    for spec in specs {
        equals_in_name(spec)?;
        if !spec.dir.is_dir() {
            return Err(InputError::Missing(spec.dir.clone()));
        }
        // The same folder under any spelling (`a`, `./a/`, a symlink) is one folder.
        let real = std::fs::canonicalize(&spec.dir).unwrap_or_else(|_| spec.dir.clone());
        if let Some((_, first)) = seen.iter().find(|(p, _)| *p == real) {
            return Err(InputError::Twice {
                dir: spec.dir.clone(),
                first: first.name.clone(),
                second: spec.name.clone(),
            });
        }
        seen.push((real, spec));
    }
    specs
        .iter()
        .map(|spec| {
            Ok(LoadedRun {
                spec: spec.clone(),
                run: load_run(&spec.dir)?,
            })
        })
        .collect()
}

/// `a=b` read as folder `a` named `b`, where no `a` exists but a folder `a=b` does.
fn equals_in_name(spec: &RunSpec) -> Result<(), InputError> {
    if spec.dir.exists() {
        return Ok(());
    }
    let mut whole = spec.dir.clone().into_os_string();
    whole.push("=");
    whole.push(&spec.name);
    let whole = PathBuf::from(whole);
    if whole.is_dir() {
        return Err(InputError::EqualsInName {
            dir: spec.dir.clone(),
            whole,
        });
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::report::{fixture, write_run};

    #[test]
    fn specs_take_the_folder_name_unless_named() {
        let s: RunSpec = "c1m-runs/2026-11-30T10:00:00Z=go".parse().unwrap();
        assert_eq!(s.dir, PathBuf::from("c1m-runs/2026-11-30T10:00:00Z"));
        assert_eq!(s.name, "go");
        let s: RunSpec = "c1m-runs/abc/".parse().unwrap();
        assert_eq!(s.name, "abc");
        let s: RunSpec = "x=a=b".parse().unwrap();
        assert_eq!((s.dir, s.name), (PathBuf::from("x=a"), "b".to_owned()));
        let e = "runs/a=".parse::<RunSpec>().unwrap_err().to_string();
        assert!(e.starts_with("runs/a=: empty name"), "{e}");
    }

    #[test]
    fn each_bad_input_is_one_line_naming_the_path() {
        let dir = fixture::test_dir("compare-input");
        let load = |p: &Path| {
            load_all(&[RunSpec {
                dir: p.to_owned(),
                name: "x".into(),
            }])
            .unwrap_err()
            .to_string()
        };
        let missing = dir.join("nope");
        let e = load(&missing);
        assert_eq!(
            e,
            format!(
                "{}: no such folder: pass a run folder written by c1m run (c1m-runs/<timestamp>/)",
                missing.display()
            )
        );
        let empty = dir.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert!(load(&empty).contains("summary.json not found: pass a run folder"));
        let other = dir.join("other");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(
            other.join(crate::report::SUMMARY),
            r#"{"name": "not ours"}"#,
        )
        .unwrap();
        let e = load(&other);
        assert!(
            e.contains("summary.json: lacks c1m_version, config, phases: not a c1m run summary (schema mismatch)"),
            "{e}"
        );
        std::fs::write(other.join(crate::report::SUMMARY), "{").unwrap();
        assert!(load(&other).contains("not a c1m run summary"));
        for e in [load(&missing), load(&empty), load(&other)] {
            assert!(!e.contains('\n'), "{e}");
        }
        assert_eq!(load_all(&[]).unwrap_err().to_string().lines().count(), 1);
        let good = dir.join("good");
        write_run(&good, &fixture::sample_run()).unwrap();
        let runs = load_all(&[RunSpec {
            dir: good.clone(),
            name: "x".into(),
        }])
        .unwrap();
        assert_eq!(runs.len(), 1);
        let twice = [
            RunSpec {
                dir: good.clone(),
                name: "x".into(),
            },
            RunSpec {
                dir: good.join("."),
                name: "y".into(),
            },
        ];
        let e = load_all(&twice).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "{}/.: given twice (as x and as y)",
                good.display()
            )),
            "{e}"
        );
    }
}
