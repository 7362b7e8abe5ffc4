//! `timeseries.csv`: one row per [`Sample`]; the header is the field names in
//! declaration order (the csv crate takes them from serde, so a new field is a new
//! column without an edit here), an empty cell for `None`.

use super::ExportError;
use crate::model::Sample;

pub(crate) fn csv(samples: &[Sample]) -> Result<String, ExportError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for s in samples {
        w.serialize(s)?;
    }
    let mut text = into_text(w)?;
    if samples.is_empty() {
        // The header alone, so an empty run still says what its columns would be.
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(Sample::default())?;
        text = into_text(w)?.lines().next().unwrap_or_default().to_owned() + "\n";
    }
    Ok(text)
}

fn into_text(w: csv::Writer<Vec<u8>>) -> Result<String, ExportError> {
    let bytes = w
        .into_inner()
        .map_err(|e| csv::Error::from(e.into_error()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_and_empty_cells() {
        let run = crate::report::sample_run();
        let text = csv(&run.samples).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines.len(),
            run.samples.len() + 1,
            "header + one row per sample"
        );
        let head: Vec<&str> = lines[0].split(',').collect();
        assert_eq!(&head[..3], ["t_s", "unix_ms", "phase"]);
        assert_eq!(head.last(), Some(&"kernel_socket_bytes_derived"));
        for l in &lines[1..] {
            assert_eq!(l.split(',').count(), head.len(), "{l}");
        }
        // None is an empty cell; a phase with a comma is quoted.
        let s = Sample {
            phase: "a,b".into(),
            ..Sample::default()
        };
        let row = csv(&[s]).unwrap().lines().nth(1).unwrap().to_owned();
        assert!(row.starts_with("0.0,0,\"a,b\",,,"), "{row}");
    }
}
