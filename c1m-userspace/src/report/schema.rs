//! `summary.schema.json`: derived (schemars) from the types `summary.json` is written
//! from, so the schema and the file cannot drift apart; doc comments become its
//! descriptions.

use crate::model::RunRecord;

/// The JSON Schema (draft 2020-12) of `summary.json`.
pub(crate) fn summary_schema() -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(&schemars::schema_for!(RunRecord))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::report::fixture;

    fn validator() -> jsonschema::Validator {
        let schema: Value = serde_json::from_str(&summary_schema().unwrap()).unwrap();
        jsonschema::validator_for(&schema).unwrap()
    }

    #[test]
    fn a_real_run_and_an_empty_one_match_the_schema() {
        let v = validator();
        // The fixture sets every Option and fills every list.
        let run = serde_json::to_value(fixture::sample_run()).unwrap();
        let errors: Vec<String> = v.iter_errors(&run).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:#?}");
        let empty = serde_json::to_value(RunRecord::default()).unwrap();
        assert!(v.is_valid(&empty));
    }

    #[test]
    fn the_schema_rejects_wrong_types() {
        let v = validator();
        let mut run = serde_json::to_value(fixture::sample_run()).unwrap();
        run["config"]["connections"] = json!(-1);
        assert!(!v.is_valid(&run), "a negative count");
        let mut run = serde_json::to_value(fixture::sample_run()).unwrap();
        run["samples"][0]["server_open"] = json!("many");
        assert!(!v.is_valid(&run), "a string for a count");
        let mut run = serde_json::to_value(fixture::sample_run()).unwrap();
        run["kernel"]["listeners"][0]["port"] = json!(1.5);
        assert!(!v.is_valid(&run), "a fractional port");
    }

    #[test]
    fn fields_are_described() {
        let schema: Value = serde_json::from_str(&summary_schema().unwrap()).unwrap();
        let sample = &schema["$defs"]["Sample"]["properties"]["kernel_age_s"];
        assert!(
            sample["description"]
                .as_str()
                .is_some_and(|d| d.contains("old")),
            "{sample}"
        );
    }
}
