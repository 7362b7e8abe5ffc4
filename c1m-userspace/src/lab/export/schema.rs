//! `summary.schema.json` (hand-written, draft 2020-12) and a validator for the subset
//! of JSON Schema it uses: `type`, `properties`, `required`, `additionalProperties`,
//! `items`, `anyOf`, `enum`, `minimum` and `$ref` to `#/$defs/…`. Any other keyword is an error,
//! so the schema cannot use something this validator would silently ignore.
//!
//! Every object of the model is closed (`additionalProperties: false`) and requires all
//! its properties, so the test that validates a fully populated run fails when a field
//! is added to or removed from the model without the schema following.

use serde_json::Value;

pub const SUMMARY_SCHEMA: &str = include_str!("summary.schema.json");

/// Keywords that only annotate.
const ANNOTATIONS: [&str; 6] = [
    "$schema",
    "$comment",
    "title",
    "description",
    "$defs",
    "examples",
];

/// Validates `instance` against `summary.schema.json`; `Err` lists every violation as
/// `json/pointer: what` (at most 50).
pub fn validate_summary(instance: &Value) -> Result<(), Vec<String>> {
    let schema: Value = serde_json::from_str(SUMMARY_SCHEMA)
        .map_err(|e| vec![format!("summary.schema.json is not JSON: {e}")])?;
    validate(&schema, instance)
}

/// Validates `instance` against `schema` (the root, for `$ref` resolution).
pub fn validate(schema: &Value, instance: &Value) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    check(schema, schema, instance, "", &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        errors.truncate(50);
        Err(errors)
    }
}

fn check(root: &Value, s: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(s) = s.as_object() else {
        if s.as_bool() == Some(false) {
            errors.push(format!("{at}: not allowed here"));
        }
        return;
    };
    for (k, kv) in s {
        match k.as_str() {
            "$ref" => match kv
                .as_str()
                .and_then(|r| r.strip_prefix("#/$defs/"))
                .and_then(|name| root.get("$defs")?.get(name))
            {
                Some(target) => check(root, target, v, at, errors),
                None => errors.push(format!("{at}: schema: cannot resolve $ref {kv}")),
            },
            "type" => {
                let names: Vec<&str> = match kv {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                    _ => vec![],
                };
                if !names.iter().any(|t| is_type(v, t)) {
                    errors.push(format!("{at}: expected {}, got {}", names.join(" or "), v));
                }
            }
            "enum" => {
                let allowed = kv.as_array().map(Vec::as_slice).unwrap_or_default();
                if !allowed.contains(v) {
                    errors.push(format!("{at}: {v} is not one of {kv}"));
                }
            }
            "minimum" => {
                if let (Some(min), Some(x)) = (kv.as_f64(), v.as_f64())
                    && x < min
                {
                    errors.push(format!("{at}: {x} is below the minimum {min}"));
                }
            }
            "properties" => {
                if let (Some(props), Some(obj)) = (kv.as_object(), v.as_object()) {
                    for (name, ps) in props {
                        if let Some(x) = obj.get(name) {
                            check(root, ps, x, &format!("{at}/{name}"), errors);
                        }
                    }
                }
            }
            "required" => {
                if let (Some(req), Some(obj)) = (kv.as_array(), v.as_object()) {
                    for name in req.iter().filter_map(Value::as_str) {
                        if !obj.contains_key(name) {
                            errors.push(format!("{at}: missing property `{name}`"));
                        }
                    }
                }
            }
            "additionalProperties" => {
                if let Some(obj) = v.as_object() {
                    let declared = s.get("properties").and_then(Value::as_object);
                    for (name, x) in obj {
                        if declared.is_some_and(|d| d.contains_key(name)) {
                            continue;
                        }
                        if kv.as_bool() == Some(false) {
                            errors.push(format!(
                                "{at}/{name}: property not in the schema (add it to summary.schema.json)"
                            ));
                        } else {
                            check(root, kv, x, &format!("{at}/{name}"), errors);
                        }
                    }
                }
            }
            "items" => {
                if let Some(items) = v.as_array() {
                    for (i, x) in items.iter().enumerate() {
                        check(root, kv, x, &format!("{at}/{i}"), errors);
                    }
                }
            }
            "anyOf" => {
                // Valid if one option is; otherwise report the closest option's errors
                // (the first on a tie: `[{$ref}, {type: null}]` explains the object).
                let options = kv.as_array().map(Vec::as_slice).unwrap_or_default();
                let mut closest: Option<Vec<String>> = None;
                for o in options {
                    let mut e = Vec::new();
                    check(root, o, v, at, &mut e);
                    if e.is_empty() {
                        closest = None;
                        break;
                    }
                    if closest.as_ref().is_none_or(|c| e.len() < c.len()) {
                        closest = Some(e);
                    }
                }
                errors.extend(closest.unwrap_or_default());
            }
            k if ANNOTATIONS.contains(&k) => {}
            other => errors.push(format!(
                "{at}: schema keyword `{other}` is not supported by this validator"
            )),
        }
    }
}

fn is_type(v: &Value, t: &str) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "string" => v.is_string(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::lab::{export::fixture, model::RunRecord};

    #[test]
    fn schema_matches_a_real_run() {
        // The fixture sets every Option and fills every list, so each object of the
        // model is checked field by field against a closed schema.
        let run = fixture::sample_run();
        let v = serde_json::to_value(&run).unwrap();
        if let Err(e) = validate_summary(&v) {
            panic!("summary.json does not match its schema:\n{}", e.join("\n"));
        }
        // ... and the empty run, where every Option is null.
        let empty = serde_json::to_value(RunRecord::default()).unwrap();
        validate_summary(&empty).unwrap();
    }

    #[test]
    fn every_closed_object_requires_all_its_properties() {
        let schema: Value = serde_json::from_str(SUMMARY_SCHEMA).unwrap();
        let mut objects = vec![("root".to_owned(), &schema)];
        for (k, d) in schema["$defs"].as_object().unwrap() {
            objects.push((k.clone(), d));
        }
        for (name, o) in objects {
            if o.get("additionalProperties") != Some(&json!(false)) {
                continue;
            }
            let props: Vec<&String> = o["properties"].as_object().unwrap().keys().collect();
            let req: Vec<&str> = o["required"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap())
                .collect();
            assert_eq!(props.len(), req.len(), "{name}");
            assert!(props.iter().all(|p| req.contains(&p.as_str())), "{name}");
        }
    }

    #[test]
    fn validator_rejects_what_the_schema_forbids() {
        let mut v = serde_json::to_value(fixture::sample_run()).unwrap();
        v["config"]["connections"] = json!(-1);
        v["samples"][0]["server_open"] = json!("many");
        v["machine"]["extra"] = json!(1);
        v["per_connection"]
            .as_object_mut()
            .unwrap()
            .remove("kernel_bytes");
        v["kernel"]["listeners"][0]["port"] = json!(1.5);
        v["outcome"] = json!("fine");
        let errs = validate_summary(&v).unwrap_err();
        let has = |s: &str| errs.iter().any(|e| e.contains(s));
        assert!(
            has("/config/connections: -1 is below the minimum 0"),
            "{errs:?}"
        );
        assert!(
            has("/samples/0/server_open: expected integer or null"),
            "{errs:?}"
        );
        assert!(
            has("/machine/extra: property not in the schema"),
            "{errs:?}"
        );
        assert!(
            has("/per_connection: missing property `kernel_bytes`"),
            "{errs:?}"
        );
        assert!(
            has("/kernel/listeners/0/port: expected integer"),
            "{errs:?}"
        );
        assert!(has("/outcome: \"fine\" is not one of"), "{errs:?}");
        assert_eq!(errs.len(), 6, "{errs:?}");
        let unknown = json!({"type": "string", "pattern": "x"});
        assert!(validate(&unknown, &json!("x")).unwrap_err()[0].contains("`pattern`"));
    }
}
